package export

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/forklab/forklab/queries"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/search"
	"github.com/mattn/go-isatty"
)

// Options says how Query writes its result.
type Options struct {
	// Format is the output format; "" is Table.
	Format Format
	// Out is the output file; "" writes to Stdout.
	Out string
	// Overwrite lets Out replace an existing file.
	Overwrite bool
	// Vars are DuckDB variables set before the query, over DefaultVars.
	Vars []Var
	// Stdout receives the result when Out is ""; nil is os.Stdout.
	Stdout io.Writer
}

// Var is a DuckDB variable (SET VARIABLE name = value); Value is a SQL
// literal.
type Var struct{ Name, Value string }

// DefaultVars are the variables the report queries read
// (queries/policy_search.sql, queries/qini.sql), at the values forklab
// report uses (search.Defaults): config_id 0, max_harm 0, harm_scope
// 'clean', holdout 0.3. Ad hoc SQL sees them through getvariable().
func DefaultVars() []Var {
	o := search.Defaults()
	return []Var{
		{"config_id", strconv.Itoa(o.ConfigID)},
		{"max_harm", strconv.Itoa(o.MaxHarm)},
		{"harm_scope", quote(o.Scope)},
		{"holdout", strconv.FormatFloat(o.Holdout, 'g', -1, 64)},
	}
}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

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
// DuckDB rejected, an empty query, a bad variable, an output file that
// exists or cannot be written, binary output to a terminal.
func BadInput(err error) bool {
	var qf *QueryFailed
	var in inputErr
	return errors.As(err, &qf) || errors.As(err, &in) || errors.Is(err, ErrExists) || errors.Is(err, ErrBadOutput)
}

// Query runs SQL text (one or more statements; the last one's rows are the
// result) over the views and macros of db, with DefaultVars and then
// o.Vars set, and writes the result in o.Format to o.Out or o.Stdout.
//
// Results stream in bounded memory: CSV, JSON, NDJSON and Parquet run
// DuckDB's COPY (the last statement must be a query), which writes rows as
// the query makes them; Table and Arrow read a query's rows back from a
// temporary on-disk table a row group at a time (readBack), Table printing
// the first 1000 rows aligned and later rows in the same columns, Arrow
// writing one record batch at a time.
//
// Errors: see BadInput for those caused by input. An output file is
// written under a temporary name and renamed when complete; on error it
// is removed and an existing file at Out is left untouched.
func Query(ctx context.Context, db *results.DB, text string, o Options) error {
	if o.Format == "" {
		o.Format = Table
	}
	if queries.Blank(text) || len(queries.Split(text)) == 0 {
		return inputErr{errors.New("the query is empty")}
	}
	if (o.Format == Arrow || o.Format == ArrowStream) && !ArrowAvailable {
		return ErrNoArrow
	}
	stdout := o.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	if o.Out == "" && o.Format.Binary() {
		if f, ok := stdout.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			return inputErr{fmt.Errorf("--format %s is binary: pass --out FILE or redirect the output", o.Format)}
		}
	}
	conn, err := db.SQL().Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, v := range append(DefaultVars(), o.Vars...) {
		if _, err := conn.ExecContext(ctx, "SET VARIABLE "+v.Name+" = "+v.Value); err != nil {
			return inputErr{fmt.Errorf("variable %s = %s: %w", v.Name, v.Value, results.QueryError(err))}
		}
	}
	var out *Output
	if o.Out != "" {
		if out, err = CreateOutput(o.Out, o.Overwrite); err != nil {
			return err
		}
		defer out.Abort()
	}
	switch o.Format {
	case Table, Arrow, ArrowStream:
		w := stdout
		if out != nil {
			w = out.File()
		}
		bw := bufio.NewWriterSize(w, 1<<16)
		tmp := "" // for readBack's database: beside the output, or the system's temporary folder
		if out != nil {
			tmp = filepath.Dir(out.Path())
		}
		if o.Format == Table {
			err = writeTable(ctx, conn, text, bw, tmp)
		} else {
			err = writeArrow(ctx, conn, text, o.Format == Arrow, bw, tmp)
		}
		if err == nil {
			err = bw.Flush()
		}
	case CSV, JSON, NDJSON, Parquet:
		err = copyQuery(ctx, conn, text, o.Format, out, stdout)
	default:
		return inputErr{fmt.Errorf("unknown format %q", o.Format)}
	}
	if err != nil {
		return err
	}
	if out != nil {
		return out.Commit()
	}
	return nil
}

// copyQuery runs every statement of text but the last, then COPY (last)
// TO the output in format f: to out's temporary file, or streamed to
// stdout through a named pipe.
func copyQuery(ctx context.Context, conn *sql.Conn, text string, f Format, out *Output, stdout io.Writer) error {
	last, err := runAllButLast(ctx, conn, text)
	if err != nil {
		return err
	}
	query, _, err := describe(ctx, conn, last)
	if err != nil {
		return err
	}
	if !query {
		return inputErr{fmt.Errorf("--format %s writes the rows of a query (SELECT, WITH, FROM, VALUES, …); the last statement is not one (use --format table for other statements)", f)}
	}
	run := func(ctx context.Context, path string) error {
		_, err := conn.ExecContext(ctx, "COPY (\n"+last+"\n) TO "+quote(path)+" ("+f.copyOptions()+")")
		if err != nil {
			return &QueryFailed{results.QueryError(err)}
		}
		return nil
	}
	if out != nil {
		return run(ctx, out.TempPath())
	}
	return streamFile(ctx, stdout, run)
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
