package sweep

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ownEntries are the top-level entries of a results directory that hold
// its data or forklab's bookkeeping of it, and who writes each: no other
// command's output may go into them (CheckOutput).
var ownEntries = map[string]string{
	ManifestName:         "the manifest",
	DerivedName:          "forklab's list of the files derived from it",
	stagingLock:          "the lock",
	ledgerDir:            "the unit ledger",
	AgentLogs:            "the agents' logs",
	"configs":            "the configs table",
	"params":             "the params table",
	"tasks":              "the tasks table",
	"checkpoints":        "the checkpoints table",
	"branches":           "the branches table",
	"pairs":              "the pairs table",
	"events":             "the session events (forklab log export)",
	"sink":               "the sunk session events (forklab log sink)",
	"results.duckdb":     "the DuckDB database (forklab db)",
	"results.duckdb.wal": "the DuckDB database's log (forklab db)",
}

// CheckOutput refuses path, a file or directory a command is about to
// write its output to, when it is one of a results directory's own files
// or lies inside one of its own folders — the manifest, a table's
// partitions (configs/, params/, tasks/, checkpoints/, branches/, pairs/),
// the session events (events/, sink/), results.duckdb, the ledger, the
// agents' logs, a sweep's staging directory — with or without --overwrite:
// a query's rows written over pairs/ or the manifest would change what every
// later command reads. The results directory itself (a sweep's --out) and
// new names beside its entries (out/report.html, out/rerun/) are fine.
// own names the entries the caller writes itself (a log export's "events",
// a log sink's "sink"). The error names the path, what it is, and where
// to write instead; it is the user's input to change (exit 2).
func CheckOutput(path string, own ...string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	abs = resolveExisting(abs)
	for p := abs; ; p = filepath.Dir(p) {
		if base := filepath.Base(p); strings.HasPrefix(base, ".") && strings.HasSuffix(base, stagingSuffix) {
			return &OwnFileError{Path: path, msg: fmt.Sprintf("output %s is inside %s, the staging directory of a sweep in progress: forklab never writes a command's output there; write it elsewhere", path, p)}
		}
		if filepath.Dir(p) == p {
			break
		}
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if isResultsDir(dir) {
			rel, _ := filepath.Rel(dir, abs)
			top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
			what, mine := ownEntries[top]
			if mine && !slices.Contains(own, top) {
				shown := filepath.Dir(path)
				for range strings.Count(filepath.ToSlash(rel), "/") {
					shown = filepath.Dir(shown)
				}
				return &OwnFileError{Path: path, msg: fmt.Sprintf("output %s is %s of the results directory %s%s: forklab never writes a command's output into a results directory's own files or partitions, with or without --overwrite; write it beside them (%s) or outside %s",
					path, what, shown, suffixIf(top != rel, " ("+top+"/)"), filepath.Join(shown, instead(filepath.Base(abs))), shown)}
			}
		}
		if filepath.Dir(dir) == dir {
			return nil
		}
	}
}

// OwnFileError is CheckOutput's refusal of an output path inside a results
// directory's own files; Path is the path as given.
type OwnFileError struct {
	Path string
	msg  string
}

func (e *OwnFileError) Error() string { return e.msg }

// resolveExisting resolves the symbolic links of the longest existing
// ancestor of abs, so that a link into a results directory is seen for
// what it points to.
func resolveExisting(abs string) string {
	for p, rest := abs, ""; ; {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return abs
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// instead is a name for an output beside a results directory's entries:
// name itself, unless it is one of them.
func instead(name string) string {
	if _, own := ownEntries[name]; !own {
		return name
	}
	ext := filepath.Ext(name)
	if ext == "" || ext == ".wal" {
		return "query-" + strings.TrimSuffix(name, ext)
	}
	return "query" + ext
}

func suffixIf(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}
