package scaleout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// Share is one share of a static split: share I of N (0 <= I < N) owns the
// units whose position in the sweep's order (sweep.Resolved.UnitSeq) is I
// modulo N, so every share gets units of every configuration and seeds
// from the whole range. I counts from 0, as Kubernetes' JOB_COMPLETION_INDEX
// does.
type Share struct{ I, N int }

// MaxShares bounds N.
const MaxShares = 1 << 20

// ParseShare parses "I/N".
func ParseShare(s string) (Share, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return Share{}, fmt.Errorf("share %q is malformed: want I/N with integers 0 <= I < N <= %d, e.g. 0/3 (I counts from 0, as JOB_COMPLETION_INDEX)", s, MaxShares)
	}
	if n < 1 || n > MaxShares || i < 0 || i >= n {
		return Share{}, fmt.Errorf("share %q is out of range: want 0 <= I < N <= %d, e.g. 0/3, 1/3, 2/3", s, MaxShares)
	}
	return Share{I: i, N: n}, nil
}

// String returns "I/N".
func (s Share) String() string { return fmt.Sprintf("%d/%d", s.I, s.N) }

// Owns reports whether the unit at position seq is this share's.
func (s Share) Owns(seq uint64) bool { return seq%uint64(s.N) == uint64(s.I) }

// Of returns the share of n owning the unit at position seq.
func Of(seq uint64, n int) Share { return Share{I: int(seq % uint64(n)), N: n} }

// shareRecord is written into the staging directory when a share has
// every one of its units in place.
type shareRecord struct {
	Share    string    `json:"share"`
	Units    int       `json:"units"`
	Version  string    `json:"forklab_version"`
	Host     string    `json:"host"`
	Finished time.Time `json:"finished_at"`
}

// sharesDir is the StateDir of the shares' records.
const sharesDir = sweep.SharesState

// ShareResult is what RunShare did.
type ShareResult struct {
	// Units is the share's unit count; Kept how many of them an earlier
	// run of the share had finished.
	Units, Kept int
	Errors      int64
}

// RunShare runs share sh of the resolved sweep into out's staging
// directory, which the other shares write at the same time, and records
// the share as finished. A share run again keeps the units it finished
// (checked against the ledger's sizes and checksums) and writes the rest,
// so a share killed midway is simply started again. A spec with max_cost
// is refused: each share would spend up to the whole budget. It publishes nothing:
// Finalize does, once every share is in. With overwrite a finished sweep
// in out is no reason to refuse (Finalize then replaces it).
func RunShare(ctx context.Context, r sweep.Resolved, out string, sh Share, overwrite bool, opt sweep.Options) (ShareResult, error) {
	var res ShareResult
	if len(r.Spec.MaxCost) > 0 {
		return res, errors.New("max_cost (--max-cost) is not enforced across the shares of a static split: leave it out, or run the sweep in one process")
	}
	st, err := sweep.StageShared(out, overwrite)
	if err != nil {
		return res, err
	}
	opt.Units = func(u sweep.Unit) bool {
		if sh.Owns(r.UnitSeq(u)) {
			res.Units++
			return true
		}
		return false
	}
	opt.FinalizeOnly = false
	run, err := sweep.Run(ctx, r, st, opt)
	if err != nil {
		var sc *sweep.SpecChangedError
		if errors.As(err, &sc) {
			// Wrapped (%w) so that errors.Is(err, sweep.ErrSpecChanged)
			// holds: the command exits 2, bad input, as a --resume of
			// another spec does.
			return res, fmt.Errorf("%s holds units %w (%s): run the share with that sweep's spec, finish or remove it (%s), or choose another --out", out, errSpecOfSweep{sc}, sc.Diff, st.Dir)
		}
		return res, err
	}
	res.Kept, res.Errors = run.Resumed, run.Errors
	host, _ := os.Hostname()
	rec := shareRecord{Share: sh.String(), Units: res.Units, Version: opt.Version, Host: host, Finished: time.Now().UTC()}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return res, err
	}
	dir := st.StateDir(sharesDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("record share %s: %w", sh, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, shareFile(sh)), append(b, '\n')); err != nil {
		return res, fmt.Errorf("record share %s: %w", sh, err)
	}
	return res, nil
}

// errSpecOfSweep reads "of a sweep of another spec" in a message and is
// sweep.ErrSpecChanged (through the SpecChangedError it wraps).
type errSpecOfSweep struct{ sc *sweep.SpecChangedError }

func (e errSpecOfSweep) Error() string { return "of a sweep of another spec" }
func (e errSpecOfSweep) Unwrap() error { return e.sc }

func shareFile(s Share) string { return fmt.Sprintf("%d-of-%d.json", s.I, s.N) }

// readShares reads the records of the finished shares in st.
func readShares(st *sweep.Staging) ([]shareRecord, error) {
	dir := st.StateDir(sharesDir)
	es, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var recs []shareRecord
	for _, e := range es {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var r shareRecord
		if json.Unmarshal(b, &r) == nil {
			recs = append(recs, r)
		}
	}
	return recs, nil
}

// ErrIncomplete reports a sweep that cannot be finalized yet: a unit, a
// share, is missing.
var ErrIncomplete = errors.New("is not complete")

// Missing checks that every unit of r is in st (ledger entry, files of the
// recorded sizes) and returns nil, or an error wrapping ErrIncomplete that
// names what is missing: for a static split the shares that have not
// finished (and what to run), otherwise the first missing units.
func Missing(r sweep.Resolved, st *sweep.Staging) error {
	recs, err := readShares(st)
	if err != nil {
		return err
	}
	// The split: the N the shares' records name (the largest, should two
	// splits have written here).
	n := 0
	for _, rec := range recs {
		if sh, err := ParseShare(rec.Share); err == nil {
			n = max(n, sh.N)
		}
	}
	missingShares := map[int]bool{}
	var missing []string
	total := 0
	r.Units(func(u sweep.Unit) bool {
		if _, ok := sweep.Finished(st, u, false); ok {
			return true
		}
		total++
		seq := r.UnitSeq(u)
		if n > 0 {
			missingShares[Of(seq, n).I] = true
		}
		if len(missing) < 3 {
			missing = append(missing, fmt.Sprintf("%s (config %d, seeds %s)", u.ID(), u.Config, u.Seeds))
		}
		return true
	})
	if total == 0 {
		return nil
	}
	more := ""
	if total > len(missing) {
		more = fmt.Sprintf(" and %d more", total-len(missing))
	}
	if n > 0 {
		var shares []string
		for i := range n {
			if missingShares[i] {
				shares = append(shares, Share{i, n}.String())
			}
		}
		slices.Sort(shares)
		return fmt.Errorf("%s %w: %d of %s %s missing, of %s %s (%s%s); run %s (forklab sweep … --shard I/N --out %s), then finalize again",
			st.Out, ErrIncomplete, total, plural.Count(r.UnitCount(), "unit"), plural.Word(total, "is", "are"), plural.Word(len(shares), "share", "shares"),
			strings.Join(shares, ", "), strings.Join(missing, ", "), more, plural.Word(len(shares), "that share", "those shares"), st.Out)
	}
	return fmt.Errorf("%s %w: %d of %s %s missing (%s%s)", st.Out, ErrIncomplete, total, plural.Count(r.UnitCount(), "unit"), plural.Word(total, "is", "are"),
		strings.Join(missing, ", "), more)
}

// errNoStaged: no unit has been written yet.
var errNoStaged = errors.New("no staged units")

// noStaged is StagedSpec's error, which is errNoStaged.
type noStaged struct{ err error }

func (e noStaged) Error() string        { return e.err.Error() }
func (e noStaged) Is(target error) bool { return target == errNoStaged }

// finalizable resolves the staged spec into r and checks that every unit
// is in.
func finalizable(out string, opt FinalizeOptions, r *sweep.Resolved) error {
	if _, _, err := sweep.StagedSpec(out); err != nil {
		if _, merr := os.Stat(filepath.Join(out, sweep.ManifestName)); merr == nil && !opt.Overwrite {
			return fmt.Errorf("output %s %w already and has no staged units: nothing to finalize", out, sweep.ErrFinished)
		}
		return noStaged{err}
	}
	var err error
	if *r, err = resolveStaged(out); err != nil {
		return err
	}
	st, err := sweep.StageShared(out, opt.Overwrite)
	if err != nil {
		return err
	}
	return Missing(*r, st)
}

// FinalizeOptions control Finalize.
type FinalizeOptions struct {
	// Overwrite replaces a finished sweep in out.
	Overwrite bool
	// Wait, if positive, waits up to this long for the missing units
	// (shares still running), checking every Poll (default 5s).
	Wait, Poll time.Duration
	// Version is the forklab version recorded in the manifest.
	Version string
}

// Finalize finishes the sweep whose units the shares of a static split
// (or the workers of a distributed sweep) wrote into out's staging
// directory: it reads the spec the units were written for, checks that
// every unit is there (naming the missing shares and units), then writes
// the configuration tables and the manifest — every file with its size,
// rows and CRC-32C, each checked against the ledger — and publishes the
// directory atomically. Shares written by different forklab versions are
// refused: their files need not be the same bytes.
func Finalize(ctx context.Context, out string, opt FinalizeOptions) (sweep.Result, error) {
	var res sweep.Result
	if opt.Poll <= 0 {
		opt.Poll = 5 * time.Second
	}
	deadline := time.Now().Add(opt.Wait)
	var r sweep.Resolved
	for {
		err := finalizable(out, opt, &r)
		if err == nil {
			break
		}
		// Waiting: for the first share to record the spec, then for the
		// missing units.
		if _, serr := os.Stat(filepath.Join(out, sweep.ManifestName)); serr == nil && !opt.Overwrite ||
			opt.Wait <= 0 || time.Now().After(deadline) || !errors.Is(err, ErrIncomplete) && !errors.Is(err, errNoStaged) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(opt.Poll):
		}
	}
	st, err := sweep.Stage(out, opt.Overwrite, true)
	if err != nil {
		return res, err
	}
	recs, err := readShares(st)
	if err != nil {
		st.Release()
		return res, err
	}
	for _, rec := range recs {
		if rec.Version != recs[0].Version {
			st.Release()
			return res, fmt.Errorf("share %s was run by forklab %s and share %s by forklab %s: run every share with one version", recs[0].Share, recs[0].Version, rec.Share, rec.Version)
		}
	}
	res, err = sweep.Run(ctx, r, st, sweep.Options{FinalizeOnly: true, Version: opt.Version})
	if err != nil {
		st.Release()
		return res, err
	}
	return res, nil
}
