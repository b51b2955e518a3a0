// Package duck opens DuckDB databases the one way forklab does, so that a
// query gives the same answer on every machine and reaches only what it is
// allowed to.
//
// Every database Open returns runs in UTC (DuckDB's TimeZone setting, which
// otherwise follows the host's TZ: under TZ=America/Los_Angeles a
// TIMESTAMPTZ of 01:00 UTC casts to the previous day) and installs or loads
// no extension by itself (autoinstall_known_extensions and
// autoload_known_extensions off, community extensions refused): the
// extensions forklab needs — parquet, json, icu — are linked into the
// binary, and nothing is fetched from the network.
//
// Lock then confines the SQL that runs on a database (DuckDB's
// enable_external_access, allowed_directories and allowed_paths settings)
// and locks its configuration (lock_configuration), so that a statement
// cannot undo the confinement.
package duck

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
)

// TimeZone is the time zone every connection runs in.
const TimeZone = "UTC"

// startup are the settings a database starts with (DuckDB's configuration
// at creation, as duckdb-go reads them from the DSN).
var startup = url.Values{
	"autoinstall_known_extensions": {"false"},
	"autoload_known_extensions":    {"false"},
	"allow_community_extensions":   {"false"},
}

// Open opens the DuckDB database file at path (created if missing), or a
// new in-memory database for path "". Its connections run in UTC and
// install or load no extension by themselves (see the package doc). The
// handle is limited to one connection: settings, variables and temporary
// objects live per connection in DuckDB, and forklab runs its statements
// in order on one. Errors: a path holding '?' (duckdb-go reads what follows
// as settings), or DuckDB's own (a file locked by another process, a file
// that is not a DuckDB database).
func Open(path string) (*sql.DB, error) { return open(path, false) }

// OpenReadOnly opens the DuckDB database file at path read-only
// (access_mode READ_ONLY): several processes may hold it so at once, and
// nothing can change it. Otherwise as Open.
func OpenReadOnly(path string) (*sql.DB, error) { return open(path, true) }

func open(path string, readOnly bool) (*sql.DB, error) {
	if strings.Contains(path, "?") {
		return nil, fmt.Errorf("open duckdb %s: a database path cannot hold '?'", path)
	}
	handleTerminate()
	q := url.Values{}
	for k, v := range startup {
		q[k] = v
	}
	if readOnly {
		q.Set("access_mode", "READ_ONLY")
	}
	c, err := duckdb.NewConnector(path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	// A global setting: every connection, now or later, starts with it,
	// and it holds after Lock (which refuses changes to it).
	if _, err := db.Exec("SET GLOBAL TimeZone = " + Quote(TimeZone)); err != nil {
		db.Close()
		return nil, fmt.Errorf("open duckdb %s: set TimeZone: %w", path, err)
	}
	return db, nil
}

// Setting is a DuckDB configuration option and its value, a SQL literal
// (SET GLOBAL Name = Value).
type Setting struct{ Name, Value string }

// Sandbox says what SQL run on a locked database may reach. The zero value
// reaches no file at all.
type Sandbox struct {
	// Dirs are directories whose files, at any depth, statements may read
	// (and, if they write at all, write): DuckDB's allowed_directories.
	// Relative names are made absolute: DuckDB checks a path before it
	// resolves it, so a relative entry would admit a relative path of the
	// same name under the working directory.
	Dirs []string
	// Files are single files statements may read or write: DuckDB's
	// allowed_paths.
	Files []string
	// ExternalAccess leaves DuckDB's enable_external_access on: any file,
	// and the network through extensions. Dirs and Files are then moot.
	ExternalAccess bool
	// Extensions turns automatic install and load of DuckDB's known
	// extensions back on (from DuckDB's extension repository, over the
	// network). DuckDB loads extensions only with external access, so it
	// needs ExternalAccess.
	Extensions bool
	// Settings are applied before the lock, in order.
	Settings []Setting
	// TempDir, when set, is where DuckDB spills what does not fit in
	// memory (temp_directory; DuckDB's default is .tmp in the working
	// directory).
	TempDir string
}

// sandboxSettings are the options Lock itself sets; a Setting naming one
// of them is refused (Reserved).
var sandboxSettings = []string{
	"enable_external_access", "allowed_directories", "allowed_paths", "lock_configuration",
	"allowed_configs", "autoinstall_known_extensions", "autoload_known_extensions",
	"autoinstall_extension_repository", "custom_extension_repository", "extension_directory",
	"allow_community_extensions", "allow_unsigned_extensions", "allow_extensions_metadata_mismatch",
	"file_search_path", "temp_directory",
}

// Reserved reports whether a setting is one the sandbox owns, which a
// Setting may not change: external access, allowed paths, the lock,
// extension loading, the file search path and the spill directory.
func Reserved(name string) bool {
	return slices.Contains(sandboxSettings, strings.ToLower(strings.TrimSpace(name)))
}

// ErrReserved reports a Setting that names an option the sandbox owns.
var ErrReserved = errors.New("is set by the sandbox")

// SettingError is a Setting DuckDB refused: an unknown option or a value
// it cannot take.
type SettingError struct {
	Setting Setting
	Err     error
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("setting %s = %s: %v", e.Setting.Name, e.Setting.Value, e.Err)
}

func (e *SettingError) Unwrap() error { return e.Err }

// Lock applies s to db and locks db's configuration: from then on no
// statement can change a setting (SET fails with DuckDB's "the
// configuration has been locked"), so statements read only s.Dirs and
// s.Files and install or load no extension unless s allows it. Variables
// (SET VARIABLE) stay free. Errors: a Setting that is Reserved (wraps
// ErrReserved) or that DuckDB refuses (a *SettingError); Extensions without
// ExternalAccess.
func Lock(ctx context.Context, db *sql.DB, s Sandbox) error {
	if s.Extensions && !s.ExternalAccess {
		return errors.New("extensions load only with external access: set ExternalAccess too")
	}
	for _, st := range s.Settings {
		if Reserved(st.Name) {
			return fmt.Errorf("setting %s %w", st.Name, ErrReserved)
		}
		if _, err := db.ExecContext(ctx, "SET GLOBAL "+quoteIdent(st.Name)+" = "+st.Value); err != nil {
			return &SettingError{Setting: st, Err: Message(err)}
		}
	}
	var stmts []string
	if s.TempDir != "" {
		stmts = append(stmts, "SET GLOBAL temp_directory = "+Quote(s.TempDir))
	}
	if !s.ExternalAccess {
		dirs, err := absAll(s.Dirs)
		if err != nil {
			return err
		}
		for i, d := range dirs {
			if !strings.HasSuffix(d, string(filepath.Separator)) {
				dirs[i] = d + string(filepath.Separator)
			}
		}
		files, err := absAll(s.Files)
		if err != nil {
			return err
		}
		stmts = append(stmts,
			"SET GLOBAL allowed_directories = "+list(dirs),
			"SET GLOBAL allowed_paths = "+list(files),
			"SET GLOBAL enable_external_access = false")
	}
	if s.Extensions {
		stmts = append(stmts,
			"SET GLOBAL autoinstall_known_extensions = true",
			"SET GLOBAL autoload_known_extensions = true")
	}
	stmts = append(stmts, "SET GLOBAL lock_configuration = true")
	for _, st := range stmts {
		if _, err := db.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("%s: %w", st, Message(err))
		}
	}
	return nil
}

func absAll(paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// list is a DuckDB list literal of strings.
func list(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Quote returns s as a SQL string literal.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Message returns DuckDB's own message for a failed statement (it names
// the error type and, for parser and binder errors, the position), without
// the driver's wrapping; other errors as they are.
func Message(err error) error {
	var de *duckdb.Error
	if errors.As(err, &de) {
		return errors.New(de.Msg)
	}
	return err
}

// RemoveFiles removes the database file at path with DuckDB's write-ahead
// log beside it (path.wal); missing files are fine.
func RemoveFiles(path string) error {
	var first error
	for _, p := range []string{path, path + ".wal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = err
		}
	}
	return first
}

// ScanAll reads every row of rows and closes it: the column names, and per
// row one value per column as the driver returns it (NULL as nil). The
// error is the first of Columns, Scan and the iteration's.
func ScanAll(rows *sql.Rows) (cols []string, out [][]any, err error) {
	defer rows.Close()
	if cols, err = rows.Columns(); err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return cols, out, err
		}
		out = append(out, vals)
	}
	return cols, out, rows.Err()
}
