package export

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/queries"
	"github.com/mattn/go-isatty"
)

// Options says how Run writes its result and what the query may do.
type Options struct {
	// Format is the output format; "" is Table.
	Format Format
	// Out is the output file; "" writes to Stdout.
	Out string
	// Overwrite lets Out replace an existing file.
	Overwrite bool
	// Vars are DuckDB variables set before the query, over DefaultVars.
	Vars []Var
	// Allow widens what the query may do (see Allow); the zero value is
	// read-only over the results directory.
	Allow Allow
	// Settings are DuckDB settings (--setting NAME=VALUE) made before the
	// configuration is locked.
	Settings []duck.Setting
	// Stdout receives the result when Out is ""; nil is os.Stdout.
	Stdout io.Writer
}

// Var is a DuckDB variable (SET VARIABLE name = value); Value is a SQL
// literal.
type Var struct{ Name, Value string }

// DefaultVars are the variables the report queries read
// (queries/policy_search.sql; holdout, through the split of the view
// pair_cells), at the values forklab report uses (search.Defaults):
// max_harm 0, harm_scope 'clean', holdout 0.3. Ad hoc SQL sees them through
// getvariable(). (The search runs for every configuration and fork step:
// there is no config_id to set.)
func DefaultVars() []Var {
	o := search.Defaults()
	return []Var{
		{"max_harm", strconv.Itoa(o.MaxHarm)},
		{"harm_scope", quote(o.Scope)},
		{"holdout", strconv.FormatFloat(o.Holdout, 'g', -1, 64)},
	}
}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// getvarCall matches a getvariable call and captures its argument's start:
// a string literal's name, or nothing when the argument is an expression.
var getvarCall = regexp.MustCompile(`(?i)getvariable\s*\(\s*(?:'([^']*)')?`)

// unreadVars refuses a variable the query text never reads: a --var whose
// name is in no getvariable('NAME') of text nor among DefaultVars (which
// the views read) would be set and ignored, a typo (--var maxharm=2 for
// max_harm) giving the default's result without a word. A getvariable
// call with a computed argument reads any name, so nothing is refused then.
// Names compare case-insensitively, as DuckDB's variables do.
func unreadVars(text string, vars []Var) error {
	read := map[string]bool{}
	for _, v := range DefaultVars() {
		read[strings.ToLower(v.Name)] = true
	}
	for _, m := range getvarCall.FindAllStringSubmatchIndex(text, -1) {
		if m[2] < 0 {
			return nil // getvariable(expr): any name may be read
		}
		read[strings.ToLower(text[m[2]:m[3]])] = true
	}
	for _, v := range vars {
		if !read[strings.ToLower(v.Name)] {
			names := make([]string, 0, len(DefaultVars()))
			for _, d := range DefaultVars() {
				names = append(names, d.Name)
			}
			return inputErr{fmt.Errorf("--var %s: the query never reads it (no getvariable('%s') in it), so it would be ignored; the report's views read %s", v.Name, v.Name, strings.Join(names, ", "))}
		}
	}
	return nil
}

// ParseVar reads NAME=VALUE. A VALUE that reads as a number, true, false
// or NULL is used as is; anything else becomes a string literal.
func ParseVar(s string) (Var, error) {
	name, value, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || !varName.MatchString(name) {
		return Var{}, inputErr{fmt.Errorf("variable %q is not NAME=VALUE with NAME a letter or _ followed by letters, digits or _", s)}
	}
	if _, err := strconv.ParseFloat(value, 64); err == nil && strings.TrimSpace(value) == value {
		return Var{name, value}, nil
	}
	switch strings.ToLower(value) {
	case "true", "false", "null":
		return Var{name, value}, nil
	}
	return Var{name, quote(value)}, nil
}

// QueryFailed is DuckDB's error for a query: its own message, which names
// the error type and, for syntax and binder errors, the line and position.
type QueryFailed struct{ Err error }

func (e *QueryFailed) Error() string { return e.Err.Error() }
func (e *QueryFailed) Unwrap() error { return e.Err }

type inputErr struct{ err error }

func (e inputErr) Error() string { return e.err.Error() }
func (e inputErr) Unwrap() error { return e.err }

// BadInput reports whether err was caused by the caller's input: a query
// DuckDB rejected, an empty query, a bad variable or setting, a statement
// or file the sandbox refused (Refused), a column a format cannot hold, an
// output file that exists or cannot be written or is a results
// directory's own (sweep.CheckOutput), binary output to a terminal, a directory that is not a finished results directory.
func BadInput(err error) bool {
	var qf *QueryFailed
	var in inputErr
	var rf *Refused
	var pe *duck.PathError
	var own *sweep.OwnFileError
	return errors.As(err, &own) || errors.As(err, &qf) || errors.As(err, &in) || errors.As(err, &rf) || errors.As(err, &pe) || errors.Is(err, ErrExists) ||
		errors.Is(err, ErrBadOutput) || errors.Is(err, atomicfile.ErrNotRegular) || errors.Is(err, sweep.ErrNotResults)
}

// ParseSetting reads a DuckDB setting NAME=VALUE for --setting; VALUE is
// taken as ParseVar takes it. Settings the sandbox owns are refused with
// the flag that controls them.
func ParseSetting(s string) (duck.Setting, error) {
	v, err := ParseVar(s)
	if err != nil {
		return duck.Setting{}, inputErr{fmt.Errorf("setting %q is not NAME=VALUE", s)}
	}
	if duck.Reserved(v.Name) {
		return duck.Setting{}, &Refused{"--allow-external-access", fmt.Sprintf("--setting %s: forklab sql sets %s itself: the --allow-path, --allow-external-access and --allow-extensions flags widen what a query reaches", v.Name, v.Name)}
	}
	return duck.Setting{Name: v.Name, Value: v.Value}, nil
}

// Run is forklab sql: it opens the results directory dir (results.Open,
// with the report's queries as views: AddReportViews) sandboxed for o, runs
// SQL text over it (one or more statements; the last one's rows are the
// result) with DefaultVars and then o.Vars set, and writes the result in
// o.Format to o.Out or o.Stdout.
//
// By default the query is read-only over dir: a statement that does not
// only read is refused (Refused, naming the flag that allows it), only
// dir's files are readable, DuckDB's configuration is locked and no
// extension is installed or loaded; o.Allow and o.Settings widen that.
//
// Every format is exact (exactColumns): a type a format cannot hold is
// converted to one it holds exactly, or refused naming the column and the
// cast to use. Results stream in bounded memory: CSV, JSON, NDJSON and
// Parquet run DuckDB's COPY (the last statement must be a query), which
// writes rows as the query makes them; Table and Arrow read a query's rows
// back from a temporary on-disk table a row group at a time (readBack),
// Table printing the first 1000 rows aligned and later rows in the same
// columns, Arrow writing one record batch at a time.
//
// Errors: see BadInput for those caused by input. An output file is
// written under a temporary name and renamed when complete; on error it
// is removed and an existing file at Out is left untouched.
func Run(ctx context.Context, dir, text string, o Options) error {
	if o.Format == "" {
		o.Format = Table
	}
	if queries.Blank(text) || len(queries.Split(text)) == 0 {
		return inputErr{errors.New("the query is empty")}
	}
	if (o.Format == Arrow || o.Format == ArrowStream) && !ArrowAvailable {
		return ErrNoArrow
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Out == "" && o.Format.Binary() {
		if f, ok := o.Stdout.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			return inputErr{fmt.Errorf("--format %s is binary: pass --out FILE or redirect the output", o.Format)}
		}
	}
	var out *Output
	if o.Out != "" {
		var err error
		if out, err = CreateOutput(o.Out, o.Overwrite); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		defer out.Abort()
	}
	// Scratch space for what DuckDB itself writes: readBack's database,
	// the named pipe to standard output, what a query spills. Beside the output, or in the
	// system's temporary folder.
	scratchIn := ""
	if out != nil {
		scratchIn = filepath.Dir(out.Path())
	}
	scratch, removeScratch, err := atomicfile.TempDir(scratchIn, ".forklab-sql-")
	if err != nil {
		return fmt.Errorf("temporary folder: %w", err)
	}
	defer removeScratch()
	sb := duck.Sandbox{
		Dirs:           []string{scratch},
		ExternalAccess: o.Allow.ExternalAccess || o.Allow.Extensions,
		Extensions:     o.Allow.Extensions,
		Settings:       o.Settings,
		TempDir:        filepath.Join(scratch, "spill"),
	}
	if out != nil {
		sb.Files = append(sb.Files, out.TempPath())
	}
	for _, p := range o.Allow.Paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			sb.Dirs = append(sb.Dirs, p)
		} else {
			sb.Files = append(sb.Files, p)
		}
	}
	db, err := results.OpenSandboxed(ctx, dir, sb)
	if err != nil {
		var se *duck.SettingError
		if errors.Is(err, duck.ErrReserved) || errors.As(err, &se) {
			return inputErr{err}
		}
		return err
	}
	defer db.Close()
	if out != nil {
		// The result belongs to this sweep: written into a results
		// directory, it is dropped when that sweep is replaced, and it is
		// not published if dir changed while the query read it.
		sweep.DeriveOutput(out, dir, db.Manifest.SweepID)
	}
	if err := db.AddReportViews(ctx); err != nil {
		return err
	}
	abs, _ := filepath.Abs(dir)
	if err := query(ctx, db, text, o, out, scratch); err != nil {
		if werr := writeFailure(err, out, scratch); werr != nil {
			return werr
		}
		return sandboxHint(err, abs)
	}
	if out != nil {
		return out.Commit()
	}
	return nil
}

// query runs text on db and writes its result to out, or o.Stdout when
// out is nil; DuckDB's own files go in scratch.
func query(ctx context.Context, db *results.DB, text string, o Options, out *Output, scratch string) error {
	h, err := db.SQLFor(ctx, text)
	if err != nil {
		return err
	}
	conn, err := h.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := unreadVars(text, o.Vars); err != nil {
		return err
	}
	for _, v := range append(DefaultVars(), o.Vars...) {
		if _, err := conn.ExecContext(ctx, "SET VARIABLE "+v.Name+" = "+v.Value); err != nil {
			return inputErr{fmt.Errorf("variable %s = %s: %w", v.Name, v.Value, results.QueryError(err))}
		}
	}
	stmts := queries.Split(text)
	for i, s := range stmts {
		stmts[i] = db.OwnFiles(s)
	}
	for i, s := range stmts[:len(stmts)-1] {
		if _, err := guard(ctx, conn, o.Allow, i+1, s); err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return &QueryFailed{results.QueryError(err)}
		}
	}
	last := stmts[len(stmts)-1]
	sh, err := guard(ctx, conn, o.Allow, len(stmts), last)
	if err != nil {
		return err
	}
	switch o.Format {
	case Table, Arrow, ArrowStream:
		w := o.Stdout
		if out != nil {
			w = out
		}
		bw := bufio.NewWriterSize(w, 1<<16)
		if o.Format == Table {
			err = writeTable(ctx, conn, last, sh, bw, scratch)
		} else {
			err = writeArrow(ctx, conn, last, sh, o.Format == Arrow, bw, scratch)
		}
		if err == nil {
			err = bw.Flush()
		}
		return err
	case CSV, JSON, NDJSON, Parquet:
		return copyQuery(ctx, conn, last, sh, o.Format, out, o.Stdout, scratch)
	}
	return inputErr{fmt.Errorf("unknown format %q", o.Format)}
}

// guard prepares statement n (1-based) and refuses it unless it only reads
// or a allows it (checkStatement; for EXPLAIN ANALYZE, the statement it
// runs too). It returns the statement's shape.
func guard(ctx context.Context, conn *sql.Conn, a Allow, n int, stmt string) (shape, error) {
	if !a.Writes && loggingCall.MatchString(stmt) {
		// Checked on the text, before DuckDB binds it (binding applies
		// it): a log in files the sandbox refuses ends the process when
		// DuckDB flushes it.
		return shape{}, &Refused{"--allow-writes", fmt.Sprintf("statement %d (%s) sets up DuckDB's logging, which writes the log to files; forklab sql runs it only with --allow-writes (the files then only where the sandbox reaches)", n, firstLine(stripComments(stmt)))}
	}
	sh, err := describe(ctx, conn, stmt)
	if errors.Is(err, ErrSeveral) && dynamicPivot.MatchString(stripComments(stmt)) {
		// DuckDB parses a PIVOT whose columns come from the data into
		// CREATE TYPE statements (enums of the values, in memory) before
		// the query; the file sandbox keeps them off the disk.
		sh, err = describeLast(ctx, conn, stmt)
	}
	if err != nil && !a.Writes && writeHead.MatchString(stripComments(stmt)) {
		// Binding a write fails first where the sandbox refuses its file
		// (COPY … TO 'DIR/tasks'): the statement is refused as a write.
		return sh, checkStatement(a, n, stmt, duckdb.STATEMENT_TYPE_COPY)
	}
	if errors.Is(err, ErrSeveral) {
		return sh, inputErr{fmt.Errorf("statement %d (%s): %w, where forklab's split of the query found one; forklab sql runs one statement at a time, each checked by DuckDB's own parse, and ran none of these: end each statement with ';' outside quotes, comments and $tag$ strings", n, firstLine(stripComments(stmt)), err)}
	}
	if err != nil {
		return sh, err
	}
	if err := checkStatement(a, n, stmt, sh.kind); err != nil {
		return sh, err
	}
	if inner := explainInner(stmt); inner != "" && sh.kind == duckdb.STATEMENT_TYPE_EXPLAIN {
		ish, err := describe(ctx, conn, inner)
		if err != nil {
			return sh, err
		}
		if err := checkStatement(a, n, inner, ish.kind); err != nil {
			return sh, err
		}
	}
	return sh, nil
}

// copyQuery runs COPY (last) TO the output in format f: to out's
// temporary file, or streamed to stdout through a named pipe in scratch.
func copyQuery(ctx context.Context, conn *sql.Conn, last string, sh shape, f Format, out *Output, stdout io.Writer, scratch string) error {
	if !sh.query() {
		return inputErr{fmt.Errorf("--format %s writes the rows of a query (SELECT, WITH, FROM, VALUES, …); the last statement is not one (use --format table for other statements)", f)}
	}
	q, err := wrapExact(f, last, sh)
	if err != nil {
		return err
	}
	run := func(ctx context.Context, path, compression string) error {
		// USE_TMP_FILE false: the file is forklab's own temporary file
		// already, and DuckDB's tmp_ copy beside it would be outside the
		// sandbox.
		_, err := conn.ExecContext(ctx, "COPY (\n"+q+"\n) TO "+quote(path)+" ("+f.copyOptions()+compression+", USE_TMP_FILE false)")
		if err != nil {
			return &QueryFailed{results.QueryError(err)}
		}
		return nil
	}
	if out != nil {
		// The temporary name does not end with the output's extensions
		// (atomicfile): the compression they ask for is said outright.
		return run(ctx, out.TempPath(), compressionOf(f, out.Path()))
	}
	return streamFile(ctx, stdout, scratch, func(ctx context.Context, path string) error { return run(ctx, path, "") })
}

// compressionOf is the COPY option for the compression the name of a CSV
// or JSON output asks for, as DuckDB reads it from the extension: .gz is
// gzip, .zst zstd; "" for none (Parquet compresses its pages itself).
func compressionOf(f Format, path string) string {
	if f == Parquet {
		return ""
	}
	switch {
	case strings.HasSuffix(path, ".gz"):
		return ", COMPRESSION gzip"
	case strings.HasSuffix(path, ".zst"):
		return ", COMPRESSION zstd"
	}
	return ""
}

// writeFailure is err, an error of DuckDB's, as a failure to write
// forklab's own files — the output's temporary file or the scratch folder
// (a full disk, a file size limit) — which is no fault of the query (exit
// 1, not 2): the message names the output file rather than its temporary
// name. It is nil for any other error.
func writeFailure(err error, out *Output, scratch string) error {
	var qf *QueryFailed
	if !errors.As(err, &qf) {
		return nil
	}
	msg := qf.Error()
	if !strings.Contains(msg, "IO Error") {
		return nil
	}
	switch {
	case out != nil && strings.Contains(msg, filepath.Base(out.TempPath())):
		msg = strings.ReplaceAll(msg, out.TempPath(), out.Path())
		msg = strings.ReplaceAll(msg, "./"+filepath.Base(out.TempPath()), out.Path())
		return fmt.Errorf("write %s: %s", out.Path(), strings.ReplaceAll(msg, filepath.Base(out.TempPath()), filepath.Base(out.Path())))
	case strings.Contains(msg, filepath.Base(scratch)):
		return fmt.Errorf("write DuckDB's temporary files in %s: %s", filepath.Dir(scratch), msg)
	}
	return nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
