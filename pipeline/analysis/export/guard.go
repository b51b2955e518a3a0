package export

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
)

// Allow is what a query may do beyond forklab sql's default, which is
// read-only over its results directory: only statements that read run,
// only the results directory's files are readable, DuckDB's configuration
// is locked, and no extension is installed or loaded. Each field is a flag
// of forklab sql (docs/bi.md).
type Allow struct {
	// Writes (--allow-writes) runs statements that change something:
	// CREATE, INSERT, UPDATE, DELETE, COPY, EXPORT, ATTACH, PREPARE, …
	// Files they write must still be inside the sandbox (the results
	// directory, Paths), or ExternalAccess must be set.
	Writes bool
	// Paths (--allow-path) are files or directories, besides the results
	// directory, that queries may read (and, with Writes, write).
	Paths []string
	// ExternalAccess (--allow-external-access) lifts the file sandbox:
	// any file, and the network through extensions.
	ExternalAccess bool
	// Extensions (--allow-extensions) lets INSTALL and LOAD run and DuckDB
	// install and load its known extensions when a query needs one, from
	// DuckDB's extension repository over the network. DuckDB loads
	// extensions only with external access, so it implies ExternalAccess.
	Extensions bool
}

// Refused is a statement or setting forklab sql does not run by default;
// Flag is the flag that allows it.
type Refused struct {
	Flag string
	Msg  string
}

func (e *Refused) Error() string { return e.Msg }

// checkStatement refuses statement n (1-based) of the query unless it
// reads or a flag of a allows it; kind is DuckDB's type for it.
func checkStatement(a Allow, n int, stmt string, kind duckdb.StmtType) error {
	body := stripComments(stmt)
	head := firstLine(body)
	if head == "" {
		head = "empty"
	}
	switch kind {
	case duckdb.STATEMENT_TYPE_SELECT, duckdb.STATEMENT_TYPE_TRANSACTION:
		// SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, PIVOT,
		// read-only PRAGMAs (DuckDB rewrites them into SELECTs); BEGIN,
		// COMMIT, ROLLBACK.
		return nil
	case duckdb.STATEMENT_TYPE_CALL:
		// CALL a table function (as SELECT * FROM it), CHECKPOINT of the
		// in-memory database.
		return nil
	case duckdb.STATEMENT_TYPE_EXPLAIN:
		// Plans only; EXPLAIN ANALYZE runs its statement, which the caller
		// checks too (explainInner).
		return nil
	case duckdb.STATEMENT_TYPE_SET:
		if variableSet.MatchString(body) || useStmt.MatchString(body) {
			return nil
		}
		return &Refused{"--setting", fmt.Sprintf("statement %d (%s) changes DuckDB's configuration, which forklab sql locks: pass the setting as --setting NAME=VALUE (the sandbox's own settings are made by the --allow-* flags)", n, head)}
	case duckdb.STATEMENT_TYPE_LOAD:
		if a.Extensions {
			return nil
		}
		return &Refused{"--allow-extensions", fmt.Sprintf("statement %d (%s) installs or loads a DuckDB extension; forklab sql loads none by default: --allow-extensions lets it (and DuckDB fetch extensions from the network)", n, head)}
	}
	if a.Writes {
		return nil
	}
	return &Refused{"--allow-writes", fmt.Sprintf("statement %d (%s) is not one that only reads; forklab sql runs only statements that read (SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, EXPLAIN, SET VARIABLE) unless given --allow-writes", n, head)}
}

var (
	// loggingCall names a function that sets up or clears DuckDB's log,
	// anywhere in a statement (in a string given to query(), too).
	loggingCall = regexp.MustCompile(`(?i)\b(?:enable_logging|disable_logging|truncate_duckdb_logs)\b`)
	// dynamicPivot is a statement that starts with PIVOT or UNPIVOT.
	dynamicPivot = regexp.MustCompile(`(?is)^(?:PIVOT|UNPIVOT|PIVOT_WIDER|PIVOT_LONGER)\b`)
	// writeHead is a statement that starts with a keyword of one that
	// writes.
	writeHead      = regexp.MustCompile(`(?is)^(?:COPY|EXPORT|IMPORT|INSERT|UPDATE|DELETE|MERGE|CREATE|DROP|ALTER|ATTACH|DETACH|INSTALL|LOAD|TRUNCATE|VACUUM|CHECKPOINT|FORCE)\b`)
	explainAnalyze = regexp.MustCompile(`(?is)^EXPLAIN\s+(?:ANALY[SZ]E\s+|\(\s*ANALY[SZ]E[^)]*\)\s*)(.*)$`)
	variableSet    = regexp.MustCompile(`(?is)^(?:SET|RESET)\s+VARIABLE\b`)
	useStmt        = regexp.MustCompile(`(?is)^USE\b`)
)

// explainInner returns the statement an EXPLAIN ANALYZE runs, or "" for
// any other statement.
func explainInner(stmt string) string {
	if m := explainAnalyze.FindStringSubmatch(stripComments(stmt)); m != nil {
		return m[1]
	}
	return ""
}

// stripComments drops the white space and comments a statement starts
// with.
func stripComments(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n\f")
		switch {
		case strings.HasPrefix(s, "--"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return ""
			}
			s = s[i+1:]
		case strings.HasPrefix(s, "/*"):
			depth, i := 0, 0
			for ; i < len(s)-1; i++ {
				if s[i:i+2] == "/*" {
					depth++
					i++
				} else if s[i:i+2] == "*/" {
					depth--
					i++
					if depth == 0 {
						break
					}
				}
			}
			if i+1 >= len(s) {
				return ""
			}
			s = s[i+1:]
		default:
			return s
		}
	}
}

// sandboxHint adds, to DuckDB's message for a file or extension the
// sandbox refused, the flag that allows it; dir is the results directory.
func sandboxHint(err error, dir string) error {
	var rf *Refused
	if errors.As(err, &rf) {
		return err
	}
	msg := err.Error()
	denied := strings.Contains(msg, "Permission Error") && strings.Contains(msg, "disabled by configuration")
	switch {
	case denied && strings.Contains(msg, "xtension"):
		return &Refused{"--allow-extensions", msg + "\nforklab sql loads no DuckDB extension by default: --allow-extensions lets it"}
	case denied:
		path := "PATH"
		if m := deniedPath.FindStringSubmatch(msg); m != nil {
			path = m[1]
		}
		if rel, err := filepath.Rel(dir, path); err == nil && filepath.IsAbs(path) && rel != ".." && !strings.HasPrefix(rel, "../") {
			if strings.ContainsAny(rel, "*?[{") {
				return &Refused{"--allow-path", fmt.Sprintf("%s\nforklab sql grants the results directory %s file by file, so that no statement can write into it, and DuckDB expands a glob only in a directory it may write: read the tables through the views (pairs, branches, …) or name each file", msg, dir)}
			}
			return &Refused{"--allow-writes", fmt.Sprintf("%s\nforklab sql lets no statement create, change or remove anything in the results directory %s: queries read its table files, through the views or by their absolute paths; write elsewhere (--allow-writes --allow-path PATH)", msg, dir)}
		}
		if !filepath.IsAbs(path) && path != "PATH" {
			// DuckDB checks a path before resolving it, so a relative one
			// is refused even inside the results directory.
			return &Refused{"--allow-path", fmt.Sprintf("%s\nforklab sql reads the results directory %s by absolute paths (%s) or through its views; other files need --allow-path PATH, or --allow-external-access for any file",
				msg, dir, filepath.Join(dir, path))}
		}
		return &Refused{"--allow-path", fmt.Sprintf("%s\nforklab sql reads only the results directory %s: --allow-path %s lets it read that too, --allow-external-access any file", msg, dir, path)}
	case strings.Contains(msg, "xtension") && strings.Contains(strings.ToLower(msg), "install"):
		return &Refused{"--allow-extensions", msg + "\nforklab sql installs and loads no DuckDB extension by default: --allow-extensions lets DuckDB fetch and load it"}
	}
	return err
}

var deniedPath = regexp.MustCompile(`Cannot access (?:file|directory) "([^"]*)"`)
