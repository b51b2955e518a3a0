package agentproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	gojson "github.com/goccy/go-json"
	"strconv"
	"strings"

	"github.com/forklab/forklab/internal/floattext"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/world"
)

// result is a reply's result type: check reports a required field that
// is missing (decoding strictly finds the rest).
type result interface{ check(where string) error }

// decodeResult decodes a result into v strictly — unknown keys and values
// of the wrong type refused, numbers kept exact, required fields present —
// which accepts nothing the named schema (schemas/agent-protocol) refuses
// (TestStrictDecodingIsTheSchema). Only a refused reply is held against
// the schema, whose verdict names the field: validating every reply with
// it would cost more than the agent's work.
func decodeResult(schema string, raw json.RawMessage, v result) error {
	err := decodeStrict(raw, v)
	if err == nil {
		return nil
	}
	if path, tok := nonFinite(raw); tok != "" {
		if path == "" {
			path = "result"
		} else if path[0] != '[' {
			path = "result." + path
		} else {
			path = "result" + path
		}
		return errors.New(nonFiniteText(path, tok))
	}
	if serr := ValidateJSON(schema, "result", raw); serr != nil {
		return serr
	}
	if path, lit := hugeNumber(raw); lit != "" {
		return fmt.Errorf("result%s is %s, beyond what a float64 holds (about ±1.8e308)", path, lit)
	}
	if strings.HasPrefix(err.Error(), "json: ") {
		return fmt.Errorf("result: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return err
}

// decodeStrict is decodeResult without the schema's wording. It decodes
// with goccy/go-json, encoding/json's API at about twice its speed: a
// reply is decoded for every start and branch.
func decodeStrict(raw json.RawMessage, v result) error {
	d := gojson.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	return v.check("result")
}

// parseValues reads the declared fields of one group (task, features,
// hidden) from vals into dst, in declaration order. Every declared field
// must be present, of its type, and no other.
func parseValues(where string, fields []world.Field, vals Values, dst []world.Value) ([]world.Value, error) {
	return world.ParseValues(where, fields, vals, dst)
}

// parseOutcome reads a branch entry's success and score against the
// declared score (nil: a pass/fail world). A scored world's entries carry
// a score within its range; a pass/fail world's carry none. Success is
// required unless the score declares a threshold; then it is derived
// from the score, and one given must agree with it.
func parseOutcome(where string, spec *world.ScoreSpec, wb WireBranch) (success bool, score *float64, err error) {
	if spec == nil {
		if wb.Score != nil {
			return false, nil, fmt.Errorf("%s.score is reported but the world declares no score (declare \"score\": {\"min\": …, \"max\": …} in initialize's world, or leave score out)", where)
		}
		if wb.Success == nil {
			return false, nil, missing(where, "success")
		}
		return *wb.Success, nil, nil
	}
	if wb.Score == nil {
		return false, nil, fmt.Errorf("%s.score is missing: the world declares a score in [%s, %s], which every branch reports", where, fmtNum(spec.Min), fmtNum(spec.Max))
	}
	x := *wb.Score
	if err := spec.Check(x); err != nil {
		return false, nil, fmt.Errorf("%s.%v", where, err)
	}
	derived, ok := spec.Success(x)
	switch {
	case wb.Success == nil && !ok:
		return false, nil, fmt.Errorf("%s.success is missing: the world's score declares no threshold to derive it from", where)
	case wb.Success == nil:
		success = derived
	case ok && *wb.Success != derived:
		return false, nil, fmt.Errorf("%s.success is %t but its score %s is %s the declared threshold %s (success is score >= threshold): report the two consistently, or leave success out", where, *wb.Success, fmtNum(x), map[bool]string{true: "at or above", false: "below"}[derived], fmtNum(*spec.Threshold))
	default:
		success = *wb.Success
	}
	return success, &x, nil
}

// hugeNumber finds the first number of raw beyond what a float64 holds
// (1e400) and returns its path below the top (".branches[0].score") and
// its text; "" when there is none.
func hugeNumber(raw []byte) (path, lit string) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	type frame struct {
		obj     bool
		key     string
		idx     int
		wantKey bool
	}
	var stack []frame
	where := func() string {
		var p strings.Builder
		for _, f := range stack {
			if f.obj {
				p.WriteString("." + f.key)
			} else {
				fmt.Fprintf(&p, "[%d]", f.idx)
			}
		}
		return p.String()
	}
	// value marks a value read in the container on top.
	value := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].obj {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].idx++
			}
		}
	}
	for {
		tok, err := d.Token()
		if err != nil {
			return "", ""
		}
		top := len(stack) - 1
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, frame{obj: true, wantKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:top]
				value()
			}
			continue
		case string:
			if top >= 0 && stack[top].obj && stack[top].wantKey {
				stack[top].key, stack[top].wantKey = t, false
				continue
			}
		case json.Number:
			if _, err := strconv.ParseFloat(string(t), 64); errors.Is(err, strconv.ErrRange) {
				return where(), string(t)
			}
		}
		value()
	}
}

// fmtNum writes a number as the protocol's JSON would.
func fmtNum(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// parseCost reads a cost: exactly the declared cost fields, integers in
// [0, 2^53] for steps and tokens, finite non-negative numbers for usd and
// seconds.
func parseCost(where string, model world.CostModel, c *Cost) (world.Cost, error) {
	var out world.Cost
	fields := []struct {
		name string
		v    *json.Number
	}{{world.CostSteps, c.Steps}, {world.CostTokens, c.Tokens}, {world.CostUSD, c.USD}, {world.CostSeconds, c.Seconds}}
	for _, f := range fields {
		declared := model.Reports(f.name)
		switch {
		case f.v == nil && declared:
			return out, fmt.Errorf("%s.%s is missing: the cost model lists it", where, f.name)
		case f.v != nil && !declared:
			return out, fmt.Errorf("%s.%s is reported but the cost model does not list it (it lists %s)", where, f.name, strings.Join(model.Fields, ", "))
		case f.v == nil:
			continue
		}
		switch f.name {
		case world.CostSteps, world.CostTokens:
			n, err := strconv.ParseInt(string(*f.v), 10, 64)
			if err != nil || n < 0 || n > world.MaxExactInt {
				return out, fmt.Errorf("%s.%s must be a non-negative integer up to 2^53, got %s", where, f.name, *f.v)
			}
			if f.name == world.CostSteps {
				out.Steps = n
			} else {
				out.Tokens = n
			}
		default:
			x, err := floattext.Parse(string(*f.v))
			if err != nil || x < 0 {
				return out, fmt.Errorf("%s.%s must be a finite non-negative number, got %s", where, f.name, *f.v)
			}
			if f.name == world.CostUSD {
				out.USD = x
			} else {
				out.Seconds = x
			}
		}
	}
	return out, nil
}

// compactJSON returns b without insignificant white space, appended to dst.
// b has been decoded already, so it is valid JSON: without any white-space
// byte it is compact as it is.
func compactJSON(dst, b []byte) ([]byte, error) {
	if bytes.IndexAny(b, " \t\r\n") < 0 {
		return append(dst, b...), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return dst, err
	}
	return append(dst, buf.Bytes()...), nil
}

// parseFork reads one fork of a start or fold result into dst.
func parseFork(where string, d *world.Declaration, wf *WireFork, dst *lab.ForkResult) error {
	var err error
	dst.Over = *wf.Over
	if dst.Checkpoint, err = compactJSON(dst.Checkpoint[:0], wf.Checkpoint); err != nil {
		return fmt.Errorf("%s.checkpoint: %v", where, err)
	}
	if dst.Features, err = parseValues(where+".features", d.Features, wf.Features, dst.Features[:0]); err != nil {
		return err
	}
	if dst.Hidden, err = parseValues(where+".hidden", d.Hidden, wf.Hidden, dst.Hidden[:0]); err != nil {
		return err
	}
	if dst.Cost, err = parseCost(where+".cost", d.Cost, wf.Cost); err != nil {
		return err
	}
	return nil
}

// ValuesOf turns declared values back into the protocol's form, by name.
func ValuesOf(fields []world.Field, vals []world.Value) Values {
	out := make(Values, len(fields))
	for i, f := range fields {
		if i < len(vals) {
			out[f.Name] = vals[i].JSON(f.Kind)
		}
	}
	return out
}

// CostOf turns a cost into the protocol's form: the fields model lists.
func CostOf(model world.CostModel, c world.Cost) *Cost {
	out := &Cost{}
	num := func(s string) *json.Number { n := json.Number(s); return &n }
	if model.Reports(world.CostSteps) {
		out.Steps = num(strconv.FormatInt(c.Steps, 10))
	}
	if model.Reports(world.CostTokens) {
		out.Tokens = num(strconv.FormatInt(c.Tokens, 10))
	}
	if model.Reports(world.CostUSD) {
		out.USD = num(strconv.FormatFloat(c.USD, 'g', -1, 64))
	}
	if model.Reports(world.CostSeconds) {
		out.Seconds = num(strconv.FormatFloat(c.Seconds, 'g', -1, 64))
	}
	return out
}
