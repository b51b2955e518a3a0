package recorded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	gojson "github.com/goccy/go-json"

	"github.com/forklab/forklab/pipeline/lab"
)

// The keys of a record forklab reads; every other key is metadata.
var recordKeys = []string{"run_id", "checkpoint", "fork_step", "seed", "task", "features", "hidden", "over", "cost"}

// parseRecord reads one record, a JSON object, into rec (reusing its
// slices): run_id (non-empty text), checkpoint (any JSON but null; a JSON
// string is the checkpoint's JSON text, as a checkpoints table's column
// holds it), and optionally fork_step, seed, task, features, hidden, over
// and cost; every other key goes, with its value as it is, into the
// metadata object (keys sorted by name). where names the record ("runs.jsonl
// line 12"); errors are *lab.RecordError.
func parseRecord(b []byte, where string, rec *lab.Record) error {
	var m map[string]json.RawMessage
	if err := gojson.Unmarshal(b, &m); err != nil || m == nil {
		return lab.BadRecord(where, "not a JSON object (a record is {\"run_id\": …, \"checkpoint\": …})")
	}
	rec.Seed, rec.Task = nil, nil
	rec.Metadata = rec.Metadata[:0]
	rec.Forks = rec.Forks[:0]
	id, ok := m["run_id"]
	if !ok {
		return lab.BadRecord(where, "no run_id: every record names its run")
	}
	if err := gojson.Unmarshal(id, &rec.RunID); err != nil || rec.RunID == "" {
		return lab.BadRecord(where, "run_id must be non-empty text, got %s", short(id))
	}
	rec.Where = where + " (run " + rec.RunID + ")"
	f := lab.RecordFork{}
	cp, ok := m["checkpoint"]
	if !ok || isNull(cp) {
		return lab.BadRecord(rec.Where, "no checkpoint")
	}
	var err error
	if f.Checkpoint, err = jsonText(cp); err != nil {
		return lab.BadRecord(rec.Where, "checkpoint: %v", err)
	}
	if v, ok := m["fork_step"]; ok && !isNull(v) {
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil || n < 1 || n > math.MaxInt32 {
			return lab.BadRecord(rec.Where, "fork_step must be an integer of at least 1, got %s", short(v))
		}
		f.ForkStep = int(n)
	}
	if v, ok := m["seed"]; ok && !isNull(v) {
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil || n >= math.MaxInt64 {
			return lab.BadRecord(rec.Where, "seed must be an integer in [0, %d], got %s", uint64(math.MaxInt64-1), short(v))
		}
		rec.Seed = &n
	}
	objects := []struct {
		key string
		dst *json.RawMessage
	}{{"task", &rec.Task}, {"features", &f.Features}, {"hidden", &f.Hidden}, {"cost", &f.Cost}}
	for _, o := range objects {
		v, ok := m[o.key]
		if !ok || isNull(v) {
			*o.dst = nil
			continue
		}
		t, err := jsonText(v)
		if err != nil || len(t) == 0 || t[0] != '{' {
			return lab.BadRecord(rec.Where, "%s must be a JSON object, got %s", o.key, short(v))
		}
		*o.dst = t
	}
	if v, ok := m["over"]; ok && !isNull(v) {
		var over bool
		if err := gojson.Unmarshal(v, &over); err != nil {
			return lab.BadRecord(rec.Where, "over must be true or false, got %s", short(v))
		}
		f.Over = &over
	}
	rec.Forks = append(rec.Forks, f)
	if len(m) > countKnown(m) {
		rec.Metadata = append(rec.Metadata, '{')
		keys := make([]string, 0, len(m))
		for k := range m {
			if !slices.Contains(recordKeys, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				rec.Metadata = append(rec.Metadata, ',')
			}
			kb, _ := json.Marshal(k)
			rec.Metadata = append(rec.Metadata, kb...)
			rec.Metadata = append(rec.Metadata, ':')
			var c bytes.Buffer
			if err := json.Compact(&c, m[k]); err != nil {
				return lab.BadRecord(rec.Where, "%s: %v", k, err)
			}
			rec.Metadata = append(rec.Metadata, c.Bytes()...)
		}
		rec.Metadata = append(rec.Metadata, '}')
	}
	return nil
}

// countKnown counts the keys of m forklab reads.
func countKnown(m map[string]json.RawMessage) int {
	n := 0
	for _, k := range recordKeys {
		if _, ok := m[k]; ok {
			n++
		}
	}
	return n
}

// jsonText returns value v as JSON: a JSON string holding JSON (a column of
// JSON text) is that text; any other value is itself.
func jsonText(v json.RawMessage) (json.RawMessage, error) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '"' {
		var s string
		if err := gojson.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		if !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("a string that is not JSON text: %s", short(v))
		}
		return json.RawMessage(s), nil
	}
	return v, nil // the record decoded: its values are JSON
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// short quotes at most 60 bytes of v.
func short(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) > 60 {
		return string(v[:57]) + "..."
	}
	return string(v)
}
