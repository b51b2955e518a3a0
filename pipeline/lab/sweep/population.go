package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/recorded"
)

// A sweep's population is a seed range (Spec.Seeds: the world plays each
// seed's run to the fork steps) or a recorded population (Spec.Runs: runs
// someone already has, read from a file, the session log or the agent,
// package recorded). Either way the sweep works on positions: seeds
// START:END, or 0:N for N recorded runs; units are ranges of positions,
// and everything downstream keys rows by run (run_id).

// Runs is a recorded population as a spec names it (forklab sweep --runs
// SOURCE; a spec file's runs:, a source's text or this object) and as the
// manifest records it: the source, and what listing it found — the
// format, the number of runs, the size and CRC-32C of what lists them
// (recorded.Listing). Two sweeps of equal Runs fork the same runs; a
// --resume, a share or a worker that finds the source listing otherwise
// refuses to go on.
type Runs struct {
	// Source is where the runs are: a file's absolute path, a session-log
	// URL naming a stream prefix, or recorded.AgentSource.
	Source string `json:"source"`
	// Format is jsonl, parquet, log or agent.
	Format string `json:"format,omitempty"`
	// Count is the number of runs; Bytes and CRC32C the size and
	// checksum of the listing (recorded.Listing: a file's bytes, a
	// prefix's stream names, an agent's run ids and metadata).
	Count  uint64 `json:"runs,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
	CRC32C string `json:"crc32c,omitempty"`
	// Metadata: some run carries metadata, which the tasks files hold.
	Metadata bool `json:"metadata,omitempty"`
}

// UnmarshalJSON reads runs as its object or, in a spec file, as the
// source's text alone (runs: runs.jsonl).
func (r *Runs) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		*r = Runs{}
		return json.Unmarshal(b, &r.Source)
	}
	type plain Runs
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var p plain
	if err := d.Decode(&p); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			// Named by the spec's own path (runs.bytes), which a decoder
			// of its own does not know, with the key's range.
			key := "runs." + typ.Field
			if r, ok := keyRanges[key]; ok && strings.HasPrefix(typ.Value, "number") {
				return keyErr(key, "must be %s, got %s", r, strings.TrimPrefix(typ.Value, "number "))
			}
			return keyErr(key, "a %s cannot be read as %s", typ.Value, kindOf(typ.Type.Kind().String()))
		}
		return fmt.Errorf("runs: %w", err)
	}
	if p.Bytes < 0 {
		return keyErr("runs.bytes", "must be an integer in [0, %d], got %d", int64(math.MaxInt64), p.Bytes)
	}
	*r = Runs(p)
	return nil
}

// FromListing returns r with what listing its source found.
func (r Runs) FromListing(l recorded.Listing) Runs {
	r.Format, r.Count, r.Bytes, r.CRC32C, r.Metadata = l.Format, l.Runs, l.Bytes, l.CRC32C, l.Metadata
	return r
}

// Population is the range of the sweep's positions: its seeds, or 0:N for
// a recorded population of N runs.
func (s Spec) Population() Range {
	if s.Runs != nil {
		return Range{0, s.Runs.Count}
	}
	return s.Seeds
}

// PopulationText names the population in a line: "seeds 0:300", "300
// recorded runs (jsonl /data/runs.jsonl)".
func (s Spec) PopulationText() string {
	if s.Runs == nil {
		return "seeds " + s.Seeds.String()
	}
	return fmt.Sprintf("%d recorded runs (%s %s)", s.Runs.Count, s.Runs.Format, s.Runs.Source)
}

// ErrPopulationChanged reports a recorded population whose source lists
// otherwise than when the sweep began (a --resume, a share or a worker
// opened it again): its runs are not the sweep's any more.
var ErrPopulationChanged = errors.New("the recorded population changed")

// OpenRuns opens the recorded population of r's spec (o's Decl is r's),
// checks that it lists what the spec recorded, and keeps it in r.Source
// for the sweep's units to read. A spec of seeds needs nothing.
func (r *Resolved) OpenRuns(ctx context.Context, o recorded.Options) error {
	runs := r.Spec.Runs
	if runs == nil || r.Source != nil {
		return nil
	}
	o.Decl, o.Builtin = r.Decl, r.Spec.Agent == nil
	if o.ForkAt == nil {
		// A file's records are at these steps (the listing found them, or
		// the sweep was given them); the log and an agent fork at them.
		o.ForkAt = r.Spec.ForkAt
	}
	src, err := recorded.Open(ctx, runs.Source, o)
	if err != nil {
		return err
	}
	if now := (Runs{Source: runs.Source}).FromListing(src.Listing()); now != *runs {
		src.Close()
		return fmt.Errorf("%w: %s listed %d runs (%d bytes, crc32c %s) when the sweep began, %d runs (%d bytes, crc32c %s) now: sweep it again without --resume (or restore it)",
			ErrPopulationChanged, runs.Source, runs.Count, runs.Bytes, runs.CRC32C, now.Count, now.Bytes, now.CRC32C)
	}
	r.Source = src
	return nil
}

// recordRunner is the runner of a recorded population: the world's
// record runner over the records the source reads for a unit.
type recordRunner struct {
	rr  lab.RecordRunner
	src recorded.Source
}

// Run forks the records at positions [lo, hi).
func (x recordRunner) Run(ctx context.Context, lo, hi uint64, emit func(*lab.SeedResult) error) error {
	next, done, err := x.src.Read(ctx, lo, hi)
	if err != nil {
		return err
	}
	defer done()
	return x.rr.RunRecords(ctx, next, emit)
}

// Costly passes on the record runner's: an agent's records are costly.
func (x recordRunner) Costly() bool {
	c, ok := x.rr.(interface{ Costly() bool })
	return ok && c.Costly()
}
