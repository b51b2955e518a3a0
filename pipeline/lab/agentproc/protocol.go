package agentproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
)

// Version is the protocol version this forklab speaks, sent in initialize
// (docs/agent-protocol.md, "Versioning").
const Version = "forklab-agent/1"

// The methods of forklab-agent/1. forklab sends requests; an agent only
// answers.
const (
	MethodInitialize = "initialize"
	MethodStart      = "start"
	MethodBranch     = "branch"
	MethodFold       = "fold"
	MethodShutdown   = "shutdown"
)

// Error codes of forklab-agent/1. The first five are JSON-RPC 2.0's own
// (https://www.jsonrpc.org/specification#error_object); the others are the
// protocol's, in JSON-RPC's range for implementation-defined server errors.
const (
	CodeParseError       = -32700 // the line is not JSON
	CodeInvalidRequest   = -32600 // JSON, but not a JSON-RPC 2.0 request
	CodeMethodNotFound   = -32601 // no such method (or an optional one the agent lacks, fold)
	CodeInvalidParams    = -32602 // params missing, of the wrong type, or refused (an arm without intervention)
	CodeInternalError    = -32603 // the agent failed for its own reasons
	CodeRunFailed        = -32000 // the run or branch failed (a model API error, a tool crashed): worth retrying
	CodeBadCheckpoint    = -32001 // the checkpoint is not one this agent (version) wrote
	CodeUnsupportedProto = -32002 // none of the offered protocol versions is spoken
)

// retryableByDefault says whether an error reply with code is retried when
// its data does not say: failures of the run are, refusals of the request
// are not (they would be refused again).
func retryableByDefault(code int) bool {
	return code == CodeRunFailed || code == CodeInternalError
}

// ClientInfo names the program that drives the agent.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// InitializeParams are initialize's params: the protocol versions forklab
// speaks, preferred first.
type InitializeParams struct {
	ProtocolVersions []string   `json:"protocol_versions"`
	Client           ClientInfo `json:"client"`
}

// AgentInfo names the agent program, for logs and reports.
type AgentInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Capabilities are the optional parts of the protocol an agent implements.
type Capabilities struct {
	// Fold: the agent answers fold (a session's events → a checkpoint).
	Fold bool `json:"fold,omitempty"`
	// Batch is the most requests the agent takes in one JSON-RPC batch
	// (a JSON array on one line); 0 or 1: no batches.
	Batch int `json:"batch,omitempty"`
	// Runs: the agent answers runs and load (its recorded runs, listed
	// and loaded: forklab sweep --runs agent:).
	Runs bool `json:"runs,omitempty"`
	// Inspect: the agent answers inspect (a checkpoint's features and
	// hidden truth, computed from it).
	Inspect bool `json:"inspect,omitempty"`
}

// InitializeResult is initialize's result: the version chosen, the world
// declaration, the capabilities.
type InitializeResult struct {
	ProtocolVersion string            `json:"protocol_version"`
	Agent           *AgentInfo        `json:"agent,omitempty"`
	World           world.Declaration `json:"world"`
	Capabilities    Capabilities      `json:"capabilities"`
}

// StartParams are start's params: play seed's run with the configuration's
// parameters and model to each fork step.
type StartParams struct {
	Seed uint64 `json:"seed"`
	// ForkSteps lists the fork steps, ascending: the run is checkpointed at
	// each, as one run (the checkpoint at 2 is a prefix of the run to 3).
	ForkSteps []int `json:"fork_steps"`
	// Params are every declared parameter, resolved (defaults filled in).
	Params world.Params `json:"params"`
	// Model is the sweep's scripted-model noise; an agent with a model of
	// its own may ignore it.
	Model fork.Model `json:"model"`
}

// Values are declared values by name, as an agent sends them: task draws,
// features, hidden truth. Parse checks them against the declaration.
type Values map[string]any

// Cost is a cost as an agent reports it: the declared cost fields, no
// others.
type Cost struct {
	Steps   *json.Number `json:"steps,omitempty"`
	Tokens  *json.Number `json:"tokens,omitempty"`
	USD     *json.Number `json:"usd,omitempty"`
	Seconds *json.Number `json:"seconds,omitempty"`
}

// WireFork is one checkpoint of start's result, or fold's result. Its
// fields are pointers so that a reply missing one is told from a zero.
type WireFork struct {
	ForkStep   *int            `json:"fork_step"`
	Over       *bool           `json:"over"`
	Checkpoint json.RawMessage `json:"checkpoint"`
	Features   Values          `json:"features"`
	Hidden     Values          `json:"hidden"`
	Cost       *Cost           `json:"cost"`
}

// check reports a required field missing or out of range; the rest of the
// reply's shape is checked by decoding it strictly.
func (f *WireFork) check(where string) error {
	switch {
	case f.ForkStep == nil:
		return missing(where, "fork_step")
	case f.Over == nil:
		return missing(where, "over")
	case f.Checkpoint == nil:
		return missing(where, "checkpoint")
	case string(bytes.TrimSpace(f.Checkpoint)) == "null":
		return fmt.Errorf("%s.checkpoint: must not be null (a checkpoint is any other JSON value)", where)
	case f.Features == nil:
		return missing(where, "features")
	case f.Hidden == nil:
		return missing(where, "hidden")
	case f.Cost == nil:
		return missing(where, "cost")
	}
	return f.Cost.check(where + ".cost")
}

func (c *Cost) check(where string) error {
	if c.Steps == nil {
		return missing(where, "steps")
	}
	return nil
}

func missing(where, field string) error {
	return fmt.Errorf("%s: missing property '%s'", where, field)
}

// StartResult is start's result: the task draws and one fork per
// requested fork step, in order.
type StartResult struct {
	Task  Values     `json:"task"`
	Forks []WireFork `json:"forks"`
}

func (r *StartResult) check(where string) error {
	if r.Task == nil {
		return missing(where, "task")
	}
	if len(r.Forks) == 0 {
		return missing(where, "forks")
	}
	for i := range r.Forks {
		if err := r.Forks[i].check(fmt.Sprintf("%s.forks[%d]", where, i)); err != nil {
			return err
		}
	}
	return nil
}

// BranchSpec is one branch asked of a checkpoint.
type BranchSpec struct {
	Arm fork.Arm `json:"arm"`
	// Intervention is the declared action the arm applies at the fork, or
	// nil for none (off, aa, and policy where its rule does not fire).
	Intervention *string `json:"intervention"`
	Replica      int     `json:"replica"`
	// NoiseKey is 16 lowercase hex digits, a 64-bit key unique to (seed,
	// fork step, arm, replica): an agent seeds its sampling from it.
	NoiseKey string `json:"noise_key"`
	// BranchID is the branch's identity across tools, BranchID's
	// <sweep_id>/<run>/<fork_step>/<arm>/<replica>: an agent may name its
	// framework's thread after it and record it in details. Sent in a
	// sweep only (with BranchParams.SweepID).
	BranchID string `json:"branch_id,omitempty"`
}

// BranchParams are branch's params: one checkpoint, the branches to finish
// from it.
type BranchParams struct {
	// SweepID is the sweep's id, its manifest's sweep_id; "" (left out)
	// outside a sweep (forklab fork).
	SweepID    string          `json:"sweep_id,omitempty"`
	Seed       uint64          `json:"seed"`
	ForkStep   int             `json:"fork_step"`
	Checkpoint json.RawMessage `json:"checkpoint"`
	Branches   []BranchSpec    `json:"branches"`
}

// WireBranch is one finished branch, or its error.
type WireBranch struct {
	Success *bool `json:"success,omitempty"`
	// Score is the branch's graded outcome: required when the world
	// declares a score, refused when it does not. With a declared
	// threshold, success may be left out (it is score >= threshold).
	Score   *float64        `json:"score,omitempty"`
	Cost    *Cost           `json:"cost,omitempty"`
	Details json.RawMessage `json:"details,omitempty"`
	// Transcript is what the branch did after the fork, step by step
	// (transcript.go); optional.
	Transcript json.RawMessage `json:"transcript,omitempty"`
	// Error, instead of the others, says the branch failed for good: its
	// rows become error rows and forklab does not ask again (an error
	// reply to the whole request is retried instead).
	Error *WireError `json:"error,omitempty"`
}

// BranchResult is branch's result: one entry per asked branch, in order.
type BranchResult struct {
	Branches []WireBranch `json:"branches"`
}

func (r *BranchResult) check(where string) error {
	if len(r.Branches) == 0 {
		return missing(where, "branches")
	}
	for i, b := range r.Branches {
		w := fmt.Sprintf("%s.branches[%d]", where, i)
		switch {
		case b.Error != nil:
			if b.Success != nil || b.Score != nil || b.Cost != nil || b.Details != nil || b.Transcript != nil {
				return fmt.Errorf("%s: an entry holds an error or an outcome, not both", w)
			}
		case b.Success == nil && b.Score == nil:
			return missing(w, "success")
		case b.Cost == nil:
			return missing(w, "cost")
		default:
			if err := b.Cost.check(w + ".cost"); err != nil {
				return err
			}
			if b.Transcript != nil {
				if err := checkTranscript(w+".transcript", b.Transcript); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// FoldParams are fold's params: the events of a session read from the
// session log, oldest first, up to the offset forked at.
type FoldParams struct {
	Stream string            `json:"stream"`
	Offset string            `json:"offset"`
	Events []json.RawMessage `json:"events"`
}

// FoldResult is fold's result: the run the events describe, as a
// checkpoint at its current step.
type FoldResult struct {
	Seed *uint64 `json:"seed"`
	WireFork
}

func (r *FoldResult) check(where string) error {
	if r.Seed == nil {
		return missing(where, "seed")
	}
	if err := r.WireFork.check(where); err != nil {
		return err
	}
	if *r.ForkStep < 0 {
		return fmt.Errorf("%s.fork_step must be 0 or more, got %d", where, *r.ForkStep)
	}
	return nil
}

// WireError is a JSON-RPC 2.0 error object.
type WireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// UnmarshalJSON reads an error object strictly: code and message are
// required, nothing else but data is allowed.
func (e *WireError) UnmarshalJSON(b []byte) error {
	var w struct {
		Code    *int            `json:"code"`
		Message *string         `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&w); err != nil {
		return fmt.Errorf("error object: %v", err)
	}
	if w.Code == nil || w.Message == nil {
		return errors.New("an error object needs code and message")
	}
	e.Code, e.Message, e.Data = *w.Code, *w.Message, w.Data
	return nil
}

// Error renders the error as "message (code N)".
func (e *WireError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Retryable says whether a request that failed with e is worth sending
// again: data.retryable when the agent says, otherwise by its code.
func (e *WireError) Retryable() bool {
	var d struct {
		Retryable *bool `json:"retryable"`
	}
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &d) == nil && d.Retryable != nil {
		return *d.Retryable
	}
	return retryableByDefault(e.Code)
}

// request is a JSON-RPC 2.0 request as forklab writes it.
type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// response is a JSON-RPC 2.0 response as an agent writes it.
type response struct {
	JSONRPC *string         `json:"jsonrpc"` // nil: the key is missing
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *WireError      `json:"error"`
}

// BranchID is a branch's stable identity (docs/agent-protocol.md,
// "branch"): <sweep_id>/<run>/<fork_step>/<arm>/<replica>, where run is the
// decimal seed of a seed population, or a recorded run's run_id
// percent-encoded as an RFC 3986 path segment (url.PathEscape); the branch
// of a policy arm is named policy, whichever of on's and off's noise it
// drew.
func BranchID(sweepID, run string, forkStep int, arm fork.Arm, replica int) string {
	return sweepID + "/" + run + "/" + strconv.Itoa(forkStep) + "/" + string(arm) + "/" + strconv.Itoa(replica)
}

// NoiseKey formats a branch's noise stream key (fork.BranchKey: the policy
// arm plays with on's stream where its rule fires, off's elsewhere) as the
// protocol sends it.
func NoiseKey(seed uint64, forkStep int, arm fork.Arm, replica int, fires bool) string {
	return fmt.Sprintf("%016x", fork.BranchKey(seed, forkStep, arm, replica, fires))
}
