package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/internal/dirlock"
	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/schemas"
	"golang.org/x/sys/unix"
)

// ManifestName is the file that marks a finished results directory.
const ManifestName = "manifest.json"

// Manifest records how a results directory was made and what it holds. It
// is written last: a directory without it is not a finished sweep.
type Manifest struct {
	ForklabVersion string `json:"forklab_version"`
	SchemaVersion  int    `json:"schema_version"`
	// SweepID identifies this sweep: results.duckdb and derived files
	// record it, so a database opened over another sweep's files refuses.
	SweepID     string            `json:"sweep_id"`
	Spec        Spec              `json:"spec"`
	Declaration world.Declaration `json:"declaration"`
	Configs     []Config          `json:"configs"`
	// Rows counts each table's rows.
	Rows map[string]int64 `json:"rows"`
	// Files lists every table file with its size, rows and CRC-32C, sorted
	// by path; forklab verify checks them, and report, sql, db and policy
	// refuse a directory whose files differ.
	Files []FileInfo `json:"files"`
	// Errors counts the pairs whose status is error (a run, fork or
	// branch failed); Cost is what every run and branch cost, as the world
	// reports it.
	Errors int64      `json:"errors"`
	Cost   world.Cost `json:"cost"`
	// ErrorRate is Errors over all pairs (0 without pairs); MaxErrorRate
	// the spec's max_error_rate. Incomplete: ErrorRate is above it, so the
	// labels count too few pairs to be the sweep's numbers — forklab sweep
	// exited 5, the report says so, and --resume plays the units with
	// errors again.
	ErrorRate    float64   `json:"error_rate"`
	MaxErrorRate float64   `json:"max_error_rate"`
	Incomplete   bool      `json:"incomplete"`
	StartedAt    time.Time `json:"started_at"`
	FinishedAt   time.Time `json:"finished_at"`
	// Checksum is the CRC-32C of the manifest's JSON with this field
	// empty: a hand-edited manifest no longer matches (Verify).
	Checksum string `json:"checksum"`
}

// FileInfo describes a finished table file: its path relative to the
// results directory (slash-separated), size in bytes, rows and CRC-32C
// (Castagnoli, as Kafka uses it) of its bytes in hexadecimal.
type FileInfo = fileInfo

// ErrFinished reports an output directory that already holds a finished
// sweep.
var ErrFinished = errors.New("holds a finished sweep")

// ErrNotResults reports a directory that is not a finished results
// directory.
var ErrNotResults = errors.New("not a finished results directory")

// ErrUnfinished reports an interrupted sweep whose work can be resumed.
var ErrUnfinished = errors.New("an interrupted sweep")

// Staging is where a sweep writes before it publishes: a hidden directory
// beside the output directory (PARENT/.NAME.forklab-staging), so that the
// output directory holds, at every moment, either the complete old sweep or
// the complete new one. Publish swaps the two atomically (renameat2 with
// RENAME_EXCHANGE). An interrupted sweep leaves its staging directory, with
// the ledger of the units it finished, for --resume; any other sweep of the
// same output replaces it.
type Staging struct {
	Out  string // the output directory
	Dir  string // the staging directory
	lock func()
	// copied: Stage filled Dir with links to the finished sweep in Out
	// (a --resume of a sweep with error rows); Out still holds it all.
	copied bool
}

// StagingDir is the staging directory of output directory out. An out
// whose last element is . or .. (--out . names the working directory) is
// made absolute first, so that the staging directory is beside it, never
// inside it.
func StagingDir(out string) string {
	clean := filepath.Clean(out)
	if b := filepath.Base(clean); b == "." || b == ".." {
		if abs, err := filepath.Abs(clean); err == nil {
			clean = abs
		}
	}
	return filepath.Join(filepath.Dir(clean), "."+filepath.Base(clean)+stagingSuffix)
}

// stagingSuffix ends the name of a staging directory.
const stagingSuffix = ".forklab-staging"

// stagingLock is the lock file in a staging directory; LockName is the
// same name, which sweeps before the staging directory held in the output
// directory itself.
const (
	stagingLock = ".forklab.lock"
	LockName    = stagingLock
)

// ledgerDir is the folder of the staging directory's unit ledger.
const ledgerDir = ".forklab-units"

// Stage checks that out may receive a sweep and opens its staging
// directory. A directory that holds a finished sweep (a manifest), or files
// forklab did not write, is refused unless overwrite is set, so that a wrong
// --out never loses anyone's files; with overwrite, files forklab did not
// write stay in the directory through the swap. A refusal leaves no trace.
// With resume, the staging directory of an interrupted sweep is kept (its
// finished units are checked and reused by Run); without, it is emptied.
// A finished sweep with error rows keeps its ledger, and resume stages it
// again (its files linked, not copied) so that Run plays only the units
// with errors again; with overwrite too, units already staged beside a
// finished sweep (an interrupted --overwrite run, the shares of a split)
// are kept, and publishing replaces the finished sweep. Errors name the
// directory and what to do.
func Stage(out string, overwrite, resume bool) (*Staging, error) {
	if err := checkOut(out); err != nil {
		return nil, err
	}
	_, merr := os.Stat(filepath.Join(out, ManifestName))
	finished := merr == nil
	retry := false // a finished sweep with error rows, to play again
	if finished && resume {
		_, stErr := os.Stat(StagingDir(out))
		if stErr == nil && overwrite {
			// Units staged to replace the finished sweep (an interrupted
			// sweep --overwrite, the shares of a split run with
			// --overwrite): go on with them; publishing replaces it.
		} else if _, err := os.Stat(filepath.Join(out, ledgerDir)); err != nil {
			if stErr == nil {
				return nil, fmt.Errorf("output %s holds a finished sweep and units staged to replace it (a run with --overwrite): pass --overwrite to go on with them and replace the finished sweep", out)
			}
			return nil, fmt.Errorf("output %s holds a finished sweep without error rows: there is nothing to resume", out)
		} else {
			retry = true
		}
	}
	if finished && !overwrite && !retry {
		return nil, fmt.Errorf("output %s %w (%s); pass --overwrite to replace it or choose another --out", out, ErrFinished, ManifestName)
	}
	_, stErr := os.Stat(StagingDir(out))
	interrupted := stErr == nil
	// A resume goes on with what the sweep it resumes was allowed.
	if !retry && !(resume && interrupted) {
		if err := checkForeign(out, overwrite, finished || interrupted); err != nil {
			return nil, err
		}
	}
	parent := filepath.Dir(filepath.Clean(out))
	if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, fmt.Errorf("output %s cannot be created: %w", out, unwrapPath(err))
		}
	}
	dir := StagingDir(out)
	_, statErr := os.Stat(dir)
	existed := statErr == nil
	release, err := dirlock.Lock(dir, stagingLock)
	if err != nil {
		if errors.Is(err, dirlock.ErrLocked) {
			return nil, fmt.Errorf("output %s: another sweep is writing it (%w)", out, err)
		}
		return nil, fmt.Errorf("output %s: %w", out, err)
	}
	s := &Staging{Out: out, Dir: dir, lock: release}
	// A sweep nested in another's results directory (make sweep's
	// rerun) derives from that sweep: it goes when that sweep is replaced.
	if err := RegisterDerived(out); err != nil {
		s.lock()
		if !existed {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("output %s: %w", out, err)
	}
	if existed && !resume {
		if err := s.clear(); err != nil {
			s.Abandon()
			return nil, err
		}
	}
	if retry {
		if _, err := os.Stat(filepath.Join(dir, ledgerDir)); err != nil {
			// Not an interrupted retry: stage the finished sweep.
			err := s.clear()
			if err == nil {
				err = stageFrom(out, dir)
			}
			if err != nil {
				s.Abandon()
				return nil, fmt.Errorf("output %s: stage the sweep to resume: %w", out, err)
			}
			s.copied = true
		}
		return s, nil
	}
	if !existed && resume {
		s.Abandon()
		return nil, fmt.Errorf("output %s has no interrupted sweep to resume (no %s); run without --resume", out, dir)
	}
	return s, nil
}

// stageFrom fills staging directory dir with the finished sweep in out:
// its table files hard-linked (a unit written again replaces its files by
// rename, so out's stay as they are), its ledger and agent logs copied
// (they are appended to).
func stageFrom(out, dir string) error {
	for _, top := range append([]string{ledgerDir, AgentLogs, schemas.ConfigsTable, schemas.ParamsTable}, schemas.Tables...) {
		src := filepath.Join(out, top)
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(out, p)
			dst := filepath.Join(dir, rel)
			if d.IsDir() {
				return os.MkdirAll(dst, 0o755)
			}
			if top != ledgerDir && top != AgentLogs && os.Link(p, dst) == nil {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o644)
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// StageShared opens out's staging directory for one of several processes
// writing units into it at once (the shares of a static split, the workers
// of a distributed sweep): it checks out as Stage does, creates the staging
// directory if needed and keeps what is in it, and takes no lock. The
// finishing step (Run with Options.FinalizeOnly, after Stage with resume)
// checks that every unit is there.
func StageShared(out string, overwrite bool) (*Staging, error) {
	if err := checkOut(out); err != nil {
		return nil, err
	}
	_, merr := os.Stat(filepath.Join(out, ManifestName))
	if merr == nil && !overwrite {
		return nil, fmt.Errorf("output %s %w (%s); pass --overwrite to replace it or choose another --out", out, ErrFinished, ManifestName)
	}
	dir := StagingDir(out)
	_, stErr := os.Stat(dir)
	if err := checkForeign(out, overwrite, merr == nil || stErr == nil); err != nil {
		return nil, err
	}
	if err := RegisterDerived(out); err != nil {
		return nil, fmt.Errorf("output %s: %w", out, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output %s: %w", out, unwrapPath(err))
	}
	return &Staging{Out: out, Dir: dir, lock: func() {}}, nil
}

// checkOut refuses an output path that is not a directory, or that is a
// symbolic link: publishing swaps the staging directory with the path
// itself, which would replace the link (and leave what it points to
// behind). The error names the link's target to give instead. It refuses
// the root of the file system and a mount point too: the staging
// directory is beside out, on its parent's file system, and nothing can
// be moved from there into another one.
func checkOut(out string) error {
	if err := duck.CheckDir("output", out); err != nil {
		return err
	}
	if err := CheckOutput(out); err != nil {
		return err
	}
	fi, err := os.Lstat(out)
	switch {
	case err != nil:
		return nil
	case fi.Mode()&os.ModeSymlink != 0:
		target, _ := filepath.EvalSymlinks(out)
		return fmt.Errorf("output %s is a symbolic link (to %s); forklab publishes a sweep by swapping directories and does not replace a link: give --out %s", out, target, target)
	case !fi.IsDir():
		return fmt.Errorf("output %s exists and is not a directory", out)
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("output %s: %w", out, err)
	}
	if filepath.Dir(abs) == abs {
		return fmt.Errorf("output %s is the root of the file system: give --out a directory of its own (%s)", out, filepath.Join(abs, "out"))
	}
	var here, parent unix.Stat_t
	if unix.Stat(abs, &here) == nil && unix.Stat(filepath.Dir(abs), &parent) == nil && here.Dev != parent.Dev {
		return fmt.Errorf("output %s is a mount point: forklab writes a sweep beside its output, on %s's file system, and cannot move it into another one: give --out a directory inside it (%s)", out, filepath.Dir(abs), filepath.Join(out, "out"))
	}
	return nil
}

// checkForeign refuses out when it holds files forklab did not write
// (foreignEntries) and the sweep may not go beside them: without
// overwrite, any (a wrong --out never mixes a sweep into someone's
// folder); with it, an entry named as one a sweep writes (tasks/,
// pairs/, results.duckdb, …) when out holds no forklab sweep (owned
// false: no manifest, no staging directory), since publishing would
// replace it. Publishing never moves the other files (Publish).
func checkForeign(out string, overwrite, owned bool) error {
	foreign, err := foreignEntries(out)
	if err != nil {
		return fmt.Errorf("output %s: %w", out, err)
	}
	if len(foreign) > 0 && !overwrite {
		return fmt.Errorf("output %s is not empty and holds no forklab sweep (it holds %s); choose an empty or new --out, or pass --overwrite to write the sweep beside those files (they stay where they are)", out, foreign[0])
	}
	if owned {
		return nil
	}
	entries, err := os.ReadDir(out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("output %s: %w", out, err)
	}
	for _, e := range entries {
		if slices.Contains(forklabEntries, e.Name()) && !strings.HasPrefix(e.Name(), ".") {
			return fmt.Errorf("output %s holds %s, which forklab did not write (%s holds no forklab sweep) and a sweep would replace: choose an empty or new --out", out, e.Name(), out)
		}
	}
	return nil
}

// clear empties the staging directory but for its lock.
func (s *Staging) clear() error {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return fmt.Errorf("staging %s: %w", s.Dir, err)
	}
	for _, e := range entries {
		if e.Name() == stagingLock {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.Dir, e.Name())); err != nil {
			return fmt.Errorf("staging %s: %w", s.Dir, unwrapPath(err))
		}
	}
	return nil
}

// Abandon releases the staging directory and removes it, leaving out as it
// was: used when a sweep is refused before it wrote anything.
func (s *Staging) Abandon() {
	os.RemoveAll(s.Dir)
	s.lock()
}

// Release releases the staging directory's lock and keeps its content, for
// --resume.
func (s *Staging) Release() { s.lock() }

// Refused ends a sweep refused before it wrote a unit (a --resume of
// another spec): a staging directory that only copies the finished sweep
// in Out (Stage of a sweep with error rows) is removed, Out holding it
// all; one holding an interrupted sweep's work is kept for a --resume with
// the right spec.
func (s *Staging) Refused() {
	if s.copied {
		s.Abandon()
		return
	}
	s.Release()
}

// Publish makes the staged sweep, whose manifest m it writes last, the
// content of the output directory, then removes the old content. Files in
// the output directory that forklab did not write or derive
// (foreignEntries) never move:
//
//   - out missing: the staging directory is renamed to it;
//   - out holding only forklab's entries: the two directories are swapped
//     in one atomic step (renameat2 with RENAME_EXCHANGE), so out holds at
//     every moment the complete old sweep or the complete new one;
//   - out holding files of someone else's, or being the working directory
//     (or holding it: --out .), which cannot be swapped away: the sweep is
//     published in place. The old manifest goes first (out is then an
//     unfinished sweep, which every reader refuses), then everything
//     forklab wrote or derived there, then the staged entries move in, and
//     the new manifest comes last. Interrupted in between, out has no
//     manifest and the staging directory keeps its ledger: --resume
//     writes again what moved and publishes.
//
// A sweep without error rows drops its unit ledger once published; one
// with error rows keeps it, for --resume to play the failed units again.
func (s *Staging) Publish(m *Manifest) error {
	sum, err := checksumOf(*m)
	if err != nil {
		return err
	}
	m.Checksum = sum
	// The spec's policy operators (>=) stay as written, not \u003e=: the
	// checksum is of the decoded manifest, whatever the escaping.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if err := atomicfile.WriteFile(filepath.Join(s.Dir, ManifestName), append(b, '\n')); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	// Registrations of derived files in the old sweep wait until the
	// swap: each is either in the list read here (and dropped with the old
	// sweep) or made after, in the new sweep.
	if _, err := os.Stat(s.Out); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(s.Dir, s.Out); err != nil {
			return fmt.Errorf("publish %s: %w", s.Out, err)
		}
		return s.published(m)
	}
	release, err := dirlock.Exclusive(s.Out)
	if err != nil {
		return fmt.Errorf("output %s: %w", s.Out, err)
	}
	defer release()
	foreign, err := foreignEntries(s.Out)
	if err != nil {
		return fmt.Errorf("output %s: %w", s.Out, err)
	}
	if len(foreign) > 0 || holdsWorkingDir(s.Out) {
		if err := s.publishInPlace(m, foreign); err != nil {
			return err
		}
		return s.published(m)
	}
	// The lock file goes with the content; the lock itself is on the open
	// file and stays held until Release.
	if err := unix.Renameat2(unix.AT_FDCWD, s.Dir, unix.AT_FDCWD, s.Out, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("publish %s: swap with %s: %w", s.Out, s.Dir, err)
	}
	// s.Dir now holds the old sweep.
	return s.published(m)
}

// published ends Publish once the new sweep is in s.Out: the staging lock
// file and (for a sweep without error rows) the unit ledger go, the
// parent directory is synced, the staging directory (now the old sweep, or
// nothing) is removed and its lock released.
func (s *Staging) published(m *Manifest) error {
	os.Remove(filepath.Join(s.Out, stagingLock))
	if m.Errors == 0 {
		if err := os.RemoveAll(filepath.Join(s.Out, ledgerDir)); err != nil {
			return fmt.Errorf("output %s: remove the unit ledger: %w", s.Out, err)
		}
	}
	if err := syncDir(filepath.Dir(filepath.Clean(s.Out))); err != nil {
		return fmt.Errorf("publish %s: %w", s.Out, err)
	}
	os.RemoveAll(s.Dir)
	s.lock()
	return nil
}

// publishInPlace publishes the staged sweep into s.Out entry by entry,
// leaving foreign (the entries forklab did not write) where they are; the
// caller holds s.Out's exclusive lock. See Publish for the order.
func (s *Staging) publishInPlace(m *Manifest, foreign []string) error {
	// The new manifest moves into out first, under a temporary name: a
	// rename that cannot reach out fails here, before out changes.
	tmp := filepath.Join(s.Out, "."+ManifestName+".forklab.tmp-publish")
	if err := os.Rename(filepath.Join(s.Dir, ManifestName), tmp); err != nil {
		return fmt.Errorf("publish %s: %w", s.Out, err)
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("publish %s: %s: %w; %s holds no finished sweep now, and %s keeps the staged one: forklab sweep --resume --out %s publishes it", s.Out, what, unwrapPath(err), s.Out, s.Dir, s.Out)
	}
	if err := os.Remove(filepath.Join(s.Out, ManifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.Remove(tmp)
		return fmt.Errorf("publish %s: remove the old manifest: %w", s.Out, err)
	}
	if err := syncDir(s.Out); err != nil {
		return fail("sync", err)
	}
	// What forklab wrote into the user's folders derives from the old
	// sweep: it goes, the folders stay.
	derived := derivedNames(s.Out)
	for _, d := range derived {
		if top, _, nested := strings.Cut(d, "/"); nested && slices.Contains(foreign, top) && !strings.Contains(d, "..") {
			if err := os.RemoveAll(filepath.Join(s.Out, filepath.FromSlash(d))); err != nil {
				return fail("drop "+d+", derived from the sweep it replaces", err)
			}
		}
	}
	old, err := os.ReadDir(s.Out)
	if err != nil {
		return fail("list", err)
	}
	for _, e := range old {
		n := e.Name()
		if n == filepath.Base(tmp) || n == DerivedName || slices.Contains(foreign, n) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.Out, n)); err != nil {
			return fail("drop "+n+" of the sweep it replaces", err)
		}
	}
	if err := os.Remove(filepath.Join(s.Out, DerivedName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail("drop "+DerivedName, err)
	}
	staged, err := os.ReadDir(s.Dir)
	if err != nil {
		return fail("list "+s.Dir, err)
	}
	// The ledger moves last: until then, a --resume finds it in s.Dir.
	slices.SortStableFunc(staged, func(a, b fs.DirEntry) int {
		return cmpBool(a.Name() == ledgerDir, b.Name() == ledgerDir)
	})
	for _, e := range staged {
		n := e.Name()
		if n == stagingLock || n == ledgerDir && m.Errors == 0 {
			continue
		}
		if err := moveIn(filepath.Join(s.Dir, n), filepath.Join(s.Out, n)); err != nil {
			return fail("move "+n+" in", err)
		}
	}
	if err := syncDir(s.Out); err != nil {
		return fail("sync", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.Out, ManifestName)); err != nil {
		return fail("put the manifest in place", err)
	}
	return syncDir(s.Out)
}

// moveIn moves a staged entry into the output directory (publishInPlace);
// a test makes it fail to leave a publish half done.
var moveIn = os.Rename

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// holdsWorkingDir says whether dir is the working directory or one of its
// ancestors: such a directory cannot be swapped away (--out . names it,
// and the rename of "." fails; by another name it would leave the shell
// that ran forklab in the old, removed sweep).
func holdsWorkingDir(dir string) bool {
	wd, err := os.Getwd()
	if err != nil {
		return false
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	if r, err := filepath.EvalSymlinks(wd); err == nil {
		wd = r
	}
	rel, err := filepath.Rel(abs, wd)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// DerivedName lists, in a results directory, the files forklab derived from
// the sweep (a report, a policy, a rerun, results.duckdb, exported events,
// a query's output): they belong to that sweep and are dropped when it is
// replaced. Each line is a path relative to the directory, slash-separated:
// a top-level entry forklab made (report.html, rerun), or a file forklab
// wrote into a folder it did not make (notes/report.html), which goes
// while the folder stays.
const DerivedName = ".forklab-derived"

// RegisterDerived records that path, written (or about to be written) by
// forklab, derives from the sweep in the results directory that contains
// it, if any (found by walking up from path's directory to a manifest). A
// path outside every results directory, or inside an entry already
// forklab's (a table folder, a registered folder), is left alone. A
// top-level entry that does not exist yet is registered whole (forklab
// makes it); a path inside a folder of someone else's is registered by
// itself.
//
// Registrations are safe under concurrency, among goroutines and processes:
// each is a read-modify-write of the list under an exclusive lock on the
// results directory (dirlock.Exclusive), which a sweep publishing over it
// also holds, so no entry is lost to another registration.
func RegisterDerived(path string) error {
	dir, ok, err := resultsDirOf(path)
	if err != nil || !ok {
		return err
	}
	release, err := dirlock.Exclusive(dir)
	if err != nil {
		return err
	}
	defer release()
	return registerLocked(dir, path)
}

// resultsDirOf is the results directory holding path (its nearest
// ancestor with a forklab manifest); false when there is none.
func resultsDirOf(path string) (string, bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false, err
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if isResultsDir(dir) {
			return dir, true, nil
		}
		if filepath.Dir(dir) == dir {
			return "", false, nil
		}
	}
}

// registerLocked is RegisterDerived for path in results directory dir,
// whose lock the caller holds.
func registerLocked(dir, path string) error {
	rel, top, nested, err := relTo(dir, path)
	if err != nil {
		return err
	}
	names := derivedNames(dir)
	if slices.Contains(names, rel) || slices.Contains(names, top) || isForklabEntry(top) {
		return nil
	}
	if nested {
		// A folder forklab makes now is its own; one that exists and is
		// nobody's derived entry is the user's.
		if _, err := os.Lstat(filepath.Join(dir, top)); errors.Is(err, fs.ErrNotExist) {
			rel = top
		}
	}
	names = append(names, rel)
	return atomicfile.WriteFile(filepath.Join(dir, DerivedName), []byte(strings.Join(names, "\n")+"\n"))
}

// DeriveOutput makes f, an output being written from the results directory
// source (whose manifest has sweep_id sweepID), belong to the sweep it
// derives from: just before f is renamed into place, the commit checks that
// source still holds that sweep — a sweep --overwrite that published
// meanwhile makes the commit fail, leaving f's path as it was, so that a
// report or a query's result never shows one sweep beside another's
// manifest — and registers f's path as derived from the results directory
// holding it (RegisterDerived). source "" skips the check.
func DeriveOutput(f *atomicfile.File, source, sweepID string) {
	f.BeforeCommit(func() error {
		// The results directory that will hold f stays locked from the
		// check to the rename: a sweep publishing over it waits, so f
		// never lands, unregistered, beside another sweep.
		dir, ok, err := resultsDirOf(f.Path())
		if err != nil {
			return err
		}
		if ok {
			release, err := dirlock.Exclusive(dir)
			if err != nil {
				return err
			}
			f.AfterCommit(release)
		}
		if source != "" {
			m, err := ReadManifest(source)
			if err != nil || m.SweepID != sweepID {
				return fmt.Errorf("%s was replaced by another sweep while forklab read it; %s is as it was: run the command again", source, f.Path())
			}
		}
		if !ok {
			return nil
		}
		return registerLocked(dir, f.Path())
	})
}

// relTo is path relative to the results directory dir, slash-separated,
// its top-level entry, and whether path lies below that entry.
func relTo(dir, path string) (rel, top string, nested bool, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", false, err
	}
	if rel, err = filepath.Rel(dir, abs); err != nil {
		return "", "", false, err
	}
	rel = filepath.ToSlash(rel)
	top, _, nested = strings.Cut(rel, "/")
	return rel, top, nested, nil
}

// isResultsDir says whether dir holds a forklab manifest (a manifest.json
// of another tool does not count).
func isResultsDir(dir string) bool {
	f, err := os.Open(filepath.Join(dir, ManifestName))
	if err != nil {
		return false
	}
	defer f.Close()
	var m struct {
		ForklabVersion string `json:"forklab_version"`
		SweepID        string `json:"sweep_id"`
	}
	return json.NewDecoder(f).Decode(&m) == nil && m.ForklabVersion != "" && m.SweepID != ""
}

func derivedNames(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, DerivedName))
	if err != nil {
		return nil
	}
	var names []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			names = append(names, l)
		}
	}
	return names
}

// forklabEntries are the top-level names a sweep, or a command deriving
// from it, writes into a results directory.
var forklabEntries = []string{ManifestName, DerivedName, stagingLock, schemas.ConfigsTable, schemas.ParamsTable,
	"tasks", "checkpoints", "branches", "pairs", "events", "results.duckdb", "results.duckdb.wal", AgentLogs}

// isForklabEntry says whether top-level name is always forklab's in a
// results directory: a table or file a sweep writes, a leftover temporary
// file, or the staging directory of a sweep nested in it.
func isForklabEntry(name string) bool {
	return slices.Contains(forklabEntries, name) || strings.HasPrefix(name, ".forklab-") || atomicfile.IsTemp(name) ||
		strings.HasPrefix(name, ".") && strings.HasSuffix(name, stagingSuffix)
}

// AgentLogs is the folder of a results directory holding an external
// agent's standard error, one file per process slot (agent-N.log).
const AgentLogs = "agent-logs"

// foreignEntries lists the top-level entries of dir that neither a sweep
// nor a command deriving from it wrote (none if dir does not exist).
func foreignEntries(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	derived := derivedNames(dir)
	var out []string
	for _, e := range entries {
		n := e.Name()
		if isForklabEntry(n) || slices.Contains(derived, n) {
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ReadManifest reads dir's manifest, failing with ErrNotResults when there is
// none.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return m, fmt.Errorf("%s is a file, not a results directory: %w", dir, ErrNotResults)
	}
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		// A first sweep into dir that was interrupted left only its
		// staging directory beside it: say so, as for a dir that exists.
		_, serr := os.Stat(StagingDir(dir))
		interrupted := serr == nil
		if interrupted && splitStaging(dir) {
			// Shares and distributed workers have no --resume: what
			// publishes their units is finalize, which names any missing.
			return m, fmt.Errorf("%s is not published yet: its units are written by shares or workers (forklab sweep --shard I/N, --distributed); once they are done, forklab sweep finalize %s publishes it, or names the units still missing: %w", dir, dir, ErrNotResults)
		}
		if fi, serr := os.Stat(dir); serr != nil || !fi.IsDir() {
			if interrupted {
				return m, fmt.Errorf("%s does not exist yet: its first sweep was interrupted (resume it with forklab sweep --resume --out %s; an external agent's sweep: with the command it was started with, adding --resume): %w", dir, dir, ErrNotResults)
			}
			return m, fmt.Errorf("%s does not exist or is not a directory: %w", dir, ErrNotResults)
		}
		if interrupted {
			return m, fmt.Errorf("%s has no %s: its sweep was interrupted (resume it with forklab sweep --resume --out %s; an external agent's sweep: with the command it was started with, adding --resume): %w", dir, ManifestName, dir, ErrNotResults)
		}
		return m, fmt.Errorf("%s has no %s: it is %w (an unfinished sweep, or not a sweep's output)", dir, ManifestName, ErrNotResults)
	}
	if err != nil {
		return m, fmt.Errorf("read manifest: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s/%s is corrupt: %v: %w", dir, ManifestName, err, ErrNotResults)
	}
	if m.SchemaVersion < schemas.OldestReadable || m.SchemaVersion > schemas.SchemaVersion {
		return m, fmt.Errorf("%s/%s has schema_version %d; this forklab reads %d to %d: rerun the sweep with this forklab: %w", dir, ManifestName, m.SchemaVersion, schemas.OldestReadable, schemas.SchemaVersion, ErrNotResults)
	}
	return m, nil
}

// syncDir flushes a directory's entries (renames) to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
