package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/forklab/forklab/pipeline/world"
)

// This file is the sweep seen one unit at a time, for processes that share
// one staging directory (pipeline/lab/scaleout: the shares of a static
// split, the workers of a distributed sweep): a unit's place in the
// sweep's order, whether it is already finished, and a writer of single
// units.

// UnitEntry is a finished unit as its ledger entry in the staging
// directory records it: the unit, its files (paths relative to the
// results directory) with their sizes, rows and CRC-32C, its error pairs
// and its cost.
type UnitEntry = ledgerEntry

// UnitsPerConfig is the number of units of each configuration.
func (r Resolved) UnitsPerConfig() uint64 {
	size := r.Spec.ShardSeeds()
	return (r.Spec.Population().Len() + size - 1) / size
}

// UnitSeq is u's position in the order Units gives (0-based): the units of
// configuration 0 by index, then those of configuration 1, and so on.
func (r Resolved) UnitSeq(u Unit) uint64 {
	return uint64(u.Config)*r.UnitsPerConfig() + uint64(u.Index)
}

// UnitAt is the unit at position seq of Units' order, and false past the
// last.
func (r Resolved) UnitAt(seq uint64) (Unit, bool) {
	per := r.UnitsPerConfig()
	if per == 0 || seq/per >= uint64(len(r.Configs)) {
		return Unit{}, false
	}
	c, i := seq/per, seq%per
	size := r.Spec.ShardSeeds()
	pop := r.Spec.Population()
	lo := pop.Start + i*size
	hi := pop.End
	if pop.End-lo > size {
		hi = lo + size
	}
	return Unit{Config: r.Configs[c].ID, Index: int(i), Seeds: Range{lo, hi}}, true
}

// StateDir is a folder for the state of the processes sharing the staging
// directory (a distributed sweep's record, its attempts, the shares'
// records), kept beside the unit ledger and removed with it when the sweep
// is published.
func (s *Staging) StateDir(name string) string { return filepath.Join(s.Dir, ledgerDir, name) }

// The StateDir names of the processes that write a sweep's units without
// finishing it themselves: the shares of a static split (forklab sweep
// --shard I/N) and a distributed sweep (forklab sweep --distributed and its
// workers). Such a sweep is published by forklab sweep finalize (or its
// coordinator), never resumed with --resume.
const (
	SharesState      = "shares"
	DistributedState = "distributed"
)

// splitStaging reports whether the staging directory of out is one that
// shares or a distributed sweep's workers write into (SharesState,
// DistributedState).
func splitStaging(out string) bool {
	st := &Staging{Dir: StagingDir(out)}
	for _, name := range []string{SharesState, DistributedState} {
		if _, err := os.Stat(st.StateDir(name)); err == nil {
			return true
		}
	}
	return false
}

// Finished returns u's ledger entry when u is finished in st: its entry is
// there and every file it lists has the recorded size (and, with full,
// the recorded CRC-32C, which reads the files). A torn or foreign entry is
// not finished.
func Finished(st *Staging, u Unit, full bool) (UnitEntry, bool) {
	b, err := os.ReadFile(filepath.Join(st.Dir, ledgerDir, u.ID()+".json"))
	if err != nil {
		return UnitEntry{}, false
	}
	var e UnitEntry
	if json.Unmarshal(b, &e) != nil || e.Unit != u || len(e.Files) == 0 {
		return UnitEntry{}, false
	}
	if full {
		return e, verifyFiles(st.Dir, e.Files) == nil
	}
	for _, f := range e.Files {
		fi, err := os.Stat(filepath.Join(st.Dir, filepath.FromSlash(f.Path)))
		if err != nil || fi.Size() != f.Bytes {
			return UnitEntry{}, false
		}
	}
	return e, true
}

// FinishedUnits reads every ledger entry of st, by unit ID (entries are
// not checked against their files: Run with FinalizeOnly does that).
func FinishedUnits(st *Staging) (map[string]UnitEntry, error) { return readLedger(st.Dir) }

// StagedSpec reads the spec the units in out's staging directory belong to
// and the world's declaration they were written with (recorded by the
// first process that wrote a unit there), for the finishing step of a
// static split. The spec is its Identity: how it ran (an agent's command)
// is not recorded.
func StagedSpec(out string) (Spec, world.Declaration, error) {
	spec, decl, err := readSpecRecord(StagingDir(out))
	if errors.Is(err, fs.ErrNotExist) {
		return spec, decl, fmt.Errorf("output %s has no staged units (no %s): nothing to finalize", out, filepath.Join(StagingDir(out), ledgerDir, specName))
	}
	return spec, decl, err
}

// ResumeSpec reads the spec --resume of out goes on with, as StagedSpec
// does: the one recorded in out's staging directory (an interrupted
// sweep) or, when there is none there, in out's own ledger (a finished
// sweep with error rows, played again). dir is the directory it was
// found in (for its agent-logs folder), "" with a nil error when neither
// records a spec. The spec is its Identity: an agent's command is not
// recorded.
func ResumeSpec(out string) (spec Spec, decl world.Declaration, dir string, err error) {
	for _, d := range []string{StagingDir(out), out} {
		spec, decl, err = readSpecRecord(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return spec, decl, "", fmt.Errorf("the spec of the sweep to resume: %w", err)
		}
		return spec, decl, d, nil
	}
	return Spec{}, world.Declaration{}, "", nil
}

// readSpecRecord reads the spec and declaration recorded in dir's ledger;
// an error wrapping fs.ErrNotExist when dir records none.
func readSpecRecord(dir string) (Spec, world.Declaration, error) {
	var rec struct {
		Spec        Spec              `json:"spec"`
		Declaration world.Declaration `json:"declaration"`
	}
	path := filepath.Join(dir, ledgerDir, specName)
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return rec.Spec, rec.Declaration, err
		}
		return rec.Spec, rec.Declaration, fmt.Errorf("read the staged spec: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec.Spec, rec.Declaration, fmt.Errorf("staged spec %s: %w", path, err)
	}
	return rec.Spec, rec.Declaration, nil
}

// UnitError is a unit the finishing step (Run with FinalizeOnly) found
// missing or damaged in the staging directory.
type UnitError struct {
	Unit Unit
	Err  error
}

func (e *UnitError) Error() string {
	return fmt.Sprintf("unit %s (config %d, seeds %s) %v", e.Unit.ID(), e.Unit.Config, e.Unit.Seeds, e.Err)
}

func (e *UnitError) Unwrap() error { return e.Err }

var errMissing = errors.New("is missing")

// Redo removes u's ledger entry from st, so that u counts as unfinished
// and is written again (a unit the finishing step found damaged).
func Redo(st *Staging, u Unit) error {
	err := os.Remove(filepath.Join(st.Dir, ledgerDir, u.ID()+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ErrPanic marks a unit whose world panicked: UnitWriter.Write recovers
// the panic and returns it as an error wrapping ErrPanic.
var ErrPanic = errors.New("panic")

// UnitWriter writes single units of one sweep into a staging directory,
// one at a time, as Run writes them: the same files, byte for byte, then
// the unit's ledger entry. Several processes may write units into one
// staging directory at once (StageShared), the same unit too: each writes
// its own temporary files and the renames put identical bytes in place.
// A UnitWriter is used by one goroutine.
type UnitWriter struct {
	r   Resolved
	ls  *layouts
	st  *Staging
	opt Options
	w   *unitWriter
	// result receives the entry of the unit being written once its
	// ledger entry is in place.
	result chan unitResult
}

type unitResult struct {
	e   ledgerEntry
	err error
}

// NewUnitWriter returns a writer of r's units into st, recording r's spec
// in st's ledger (or, when one is recorded, refusing a ledger of another
// spec). Of opt, Runners, Progress and SweepID are used; without a
// SweepID the one recorded in st's ledger is used, or a new one recorded.
func NewUnitWriter(r Resolved, st *Staging, opt Options) (*UnitWriter, error) {
	ls, err := layoutsFor(r.Decl, r.Spec.Runs, r.Spec.Transcripts)
	if err != nil {
		return nil, err
	}
	if err := checkLedgerSpec(st.Dir, r.Spec.Identity(), r.Decl); err != nil {
		return nil, err
	}
	if opt.SweepID, err = ledgerSweepID(st.Dir, opt.SweepID); err != nil {
		return nil, err
	}
	return &UnitWriter{r: r, ls: ls, st: st, opt: opt, result: make(chan unitResult, 1)}, nil
}

// Write runs unit u (whether or not it is finished already) and returns
// its ledger entry once its files and the entry are in place. A panic of
// the world is recovered and returned as an error wrapping ErrPanic; the
// writer stays usable. Errors writing the files (disk full, a lost mount)
// wrap *fs.PathError.
func (uw *UnitWriter) Write(ctx context.Context, u Unit) (e UnitEntry, err error) {
	if uw.w == nil {
		uw.w = newUnitWriter(uw.r, uw.ls, uw.st.Dir, uw.opt, nil, func(e ledgerEntry, err error) {
			uw.result <- unitResult{e, err}
		})
	}
	w := uw.w
	w.sync = newSyncer()
	defer func() {
		if p := recover(); p != nil {
			// The runner may be left mid-seed: start afresh next time.
			w.each(func(t *tableFile) error { t.abort(); return nil })
			w.sync.wait()
			w.close()
			uw.w = nil
			select {
			case <-uw.result:
			default:
			}
			buf := make([]byte, 4096)
			buf = buf[:runtime.Stack(buf, false)]
			err = fmt.Errorf("unit %s (config %d, seeds %s): %w: %v (%s)", u.ID(), u.Config, u.Seeds, ErrPanic, p, panicSite(buf))
		}
	}()
	_, err = w.run(ctx, u)
	if werr := w.sync.wait(); err == nil {
		err = werr
	}
	if err != nil {
		select {
		case <-uw.result:
		default:
		}
		return e, err
	}
	res := <-uw.result
	return res.e, res.err
}

// panicSite picks, from a goroutine's stack, the first frame below the
// runtime's panic machinery: where the world panicked.
func panicSite(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	for i := 1; i+1 < len(lines); i += 2 {
		fn := strings.TrimSpace(lines[i])
		if strings.HasPrefix(fn, "panic(") || strings.HasPrefix(fn, "runtime.") || strings.Contains(fn, "sweep.(*UnitWriter).Write") ||
			strings.HasPrefix(fn, "goroutine ") {
			continue
		}
		if at := strings.TrimSpace(lines[i+1]); at != "" {
			if k := strings.LastIndex(at, " +0x"); k > 0 {
				at = at[:k]
			}
			return "at " + filepath.Base(at)
		}
	}
	return "site unknown"
}

// Close releases what the writer's runners hold (agent processes).
func (uw *UnitWriter) Close() {
	if uw.w != nil {
		uw.w.close()
		uw.w = nil
	}
}
