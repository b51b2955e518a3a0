package agentproc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/forklab/forklab/pipeline/world"
)

// A branch result entry may carry a transcript: what the branch did after
// the fork, step by step (docs/agent-protocol.md, "Transcripts";
// branch.result.schema.json's $defs/step). forklab keeps it, compacted, in
// the branches table's transcript column, and forklab show prints it beside
// the control's. The shape is lab's, which built-in worlds record too.

// stepKeys are the keys a transcript step may have.
var stepKeys = []string{"step", "action", "intervention", "tool_call", "tool_result", "observation", "cost"}

// checkTranscript checks a transcript's shape as branch.result.schema.json
// does (an array of step objects: action a non-empty string, step a
// non-negative integer, intervention a boolean, tool_call {name,
// arguments}, cost a cost object, no other key), so that decoding refuses
// whatever the schema refuses; the cost fields are checked against the
// declaration by transcriptCosts.
func checkTranscript(where string, raw json.RawMessage) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	steps, ok := v.([]any)
	if !ok {
		return fmt.Errorf("%s must be an array of steps", where)
	}
	for i, s := range steps {
		w := fmt.Sprintf("%s[%d]", where, i)
		step, ok := s.(map[string]any)
		if !ok {
			return fmt.Errorf("%s must be an object", w)
		}
		for k, x := range step {
			if !slices.Contains(stepKeys, k) {
				return fmt.Errorf("%s: additional properties '%s' not allowed", w, k)
			}
			var err error
			switch k {
			case "step":
				err = checkCount(w+".step", x)
			case "action":
				if a, ok := x.(string); !ok || a == "" {
					err = fmt.Errorf("%s.action must be a non-empty string", w)
				}
			case "intervention":
				if _, ok := x.(bool); !ok {
					err = fmt.Errorf("%s.intervention must be a boolean", w)
				}
			case "tool_call":
				err = checkToolCall(w+".tool_call", x)
			case "cost":
				err = checkCostObject(w+".cost", x)
			}
			if err != nil {
				return err
			}
		}
		if _, ok := step["action"]; !ok {
			return missing(w, "action")
		}
	}
	return nil
}

// checkCount checks an integer in [0, 2^53].
func checkCount(where string, x any) error {
	n, ok := x.(json.Number)
	if ok {
		v, err := strconv.ParseInt(string(n), 10, 64)
		ok = err == nil && v >= 0 && v <= world.MaxExactInt
	}
	if !ok {
		return fmt.Errorf("%s must be an integer in [0, 2^53], got %v", where, x)
	}
	return nil
}

func checkToolCall(where string, x any) error {
	tc, ok := x.(map[string]any)
	if !ok {
		return fmt.Errorf("%s must be an object {\"name\": …, \"arguments\": …}", where)
	}
	for k := range tc {
		if k != "name" && k != "arguments" {
			return fmt.Errorf("%s: additional properties '%s' not allowed", where, k)
		}
	}
	if name, ok := tc["name"].(string); !ok || name == "" {
		if _, present := tc["name"]; !present {
			return missing(where, "name")
		}
		return fmt.Errorf("%s.name must be a non-empty string", where)
	}
	return nil
}

// checkCostObject checks a cost object's shape (common.schema.json's
// cost): steps required, known fields only, each a non-negative number,
// steps and tokens integers.
func checkCostObject(where string, x any) error {
	c, ok := x.(map[string]any)
	if !ok {
		return fmt.Errorf("%s must be a cost object", where)
	}
	if _, ok := c[world.CostSteps]; !ok {
		return missing(where, world.CostSteps)
	}
	for k, v := range c {
		switch k {
		case world.CostSteps, world.CostTokens:
			if err := checkCount(where+"."+k, v); err != nil {
				return err
			}
		case world.CostUSD, world.CostSeconds:
			n, ok := v.(json.Number)
			if f, err := n.Float64(); !ok || err != nil || f < 0 {
				return fmt.Errorf("%s.%s must be a non-negative number, got %v", where, k, v)
			}
		default:
			return fmt.Errorf("%s: additional properties '%s' not allowed (cost fields: %s)", where, k, strings.Join(world.CostFields, ", "))
		}
	}
	return nil
}

// transcriptCosts checks the cost of every step of a transcript (already
// checkTranscript's) against the declaration's cost model, as a branch's
// own cost is.
func transcriptCosts(where string, model world.CostModel, raw json.RawMessage) error {
	var steps []struct {
		Cost *Cost `json:"cost"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&steps); err != nil {
		return fmt.Errorf("%s: %v", where, err)
	}
	for i, s := range steps {
		if s.Cost == nil {
			continue
		}
		if _, err := parseCost(fmt.Sprintf("%s[%d].cost", where, i), model, s.Cost); err != nil {
			return err
		}
	}
	return nil
}
