package recorded

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"

	"github.com/forklab/forklab/pipeline/lab"
)

// Lister is an external agent that lists the runs it can load (it
// declares the runs capability: docs/agent-protocol.md, "runs"), as
// agentproc.Definition does.
type Lister interface {
	// ListRuns returns one page of the agent's runs from cursor ("" for
	// the first page), at most limit of them, and the cursor of the next
	// page ("" after the last).
	ListRuns(ctx context.Context, cursor string, limit int) (runs []Run, next string, err error)
}

// Run is one run an agent lists: its id and what the agent says about it
// (any JSON, nil for none).
type Run struct {
	RunID    string          `json:"run_id"`
	Metadata json.RawMessage `json:"metadata"`
}

// PageSize is how many runs forklab asks the agent for at once.
const PageSize = 1000

// agentSource is an agent's own runs, in the order it lists them; each is
// loaded by the agent when forked (its record has no checkpoint).
type agentSource struct {
	runs    []Run
	listing Listing
}

func openAgent(ctx context.Context, o Options) (*agentSource, error) {
	s := &agentSource{}
	seen := map[string]int{}
	cursors := map[string]bool{}
	crc := uint32(0)
	var n int64
	cursor := ""
	for {
		page, next, err := o.Agent.ListRuns(ctx, cursor, PageSize)
		if err != nil {
			return nil, fmt.Errorf("runs %s: the agent's runs: %w", AgentSource, err)
		}
		for _, r := range page {
			where := fmt.Sprintf("agent run %q (listed %d)", r.RunID, len(s.runs)+1)
			if r.RunID == "" {
				return nil, lab.BadRecord(where, "an empty run_id: every run needs one")
			}
			if first, ok := seen[r.RunID]; ok {
				return nil, lab.BadRecord(where, "run_id %q was listed as run %d too: run ids must be unique in a population", r.RunID, first)
			}
			seen[r.RunID] = len(s.runs) + 1
			if len(r.Metadata) > 0 && string(bytes.TrimSpace(r.Metadata)) != "null" {
				var c bytes.Buffer
				if err := json.Compact(&c, r.Metadata); err != nil {
					return nil, lab.BadRecord(where, "metadata: %v", err)
				}
				r.Metadata = c.Bytes()
			} else {
				r.Metadata = nil
			}
			line, _ := json.Marshal(r)
			line = append(line, '\n')
			crc = crc32.Update(crc, castagnoli, line)
			n += int64(len(line))
			s.runs = append(s.runs, r)
		}
		if next == "" {
			break
		}
		if cursors[next] || len(page) == 0 {
			return nil, fmt.Errorf("runs %s: the agent's runs did not move on: cursor %q again after %d runs (a next_cursor must lead to the next page; null after the last)", AgentSource, next, len(s.runs))
		}
		cursors[next] = true
		cursor = next
	}
	if len(s.runs) == 0 {
		return nil, fmt.Errorf("runs %s: the agent lists no run (its runs method answered an empty list): there is nothing to fork", AgentSource)
	}
	s.listing = Listing{Format: FormatAgent, Runs: uint64(len(s.runs)), Bytes: n, CRC32C: crcText(crc)}
	for _, r := range s.runs {
		if r.Metadata != nil {
			s.listing.Metadata = true
			break
		}
	}
	return s, nil
}

func (s *agentSource) Listing() Listing { return s.listing }
func (s *agentSource) Check() error     { return nil }
func (s *agentSource) Close() error     { return nil }

// Read yields runs [lo, hi) as records without a checkpoint: the agent
// loads each.
func (s *agentSource) Read(ctx context.Context, lo, hi uint64) (lab.Records, func(), error) {
	if lo > hi || hi > uint64(len(s.runs)) {
		return nil, nil, fmt.Errorf("runs %s: positions %d:%d are outside its %d runs", AgentSource, lo, hi, len(s.runs))
	}
	pos := lo
	var rec lab.Record
	next := func(context.Context) (*lab.Record, error) {
		if pos >= hi {
			return nil, nil
		}
		r := s.runs[pos]
		rec = lab.Record{Pos: pos, RunID: r.RunID, Where: fmt.Sprintf("agent run %q", r.RunID), Metadata: r.Metadata}
		pos++
		return &rec, nil
	}
	return next, func() {}, nil
}
