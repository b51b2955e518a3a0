package sweep

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/parquet-go/parquet-go"
)

// colType is the physical type of a column of a table file.
type colType uint8

const (
	colInt64  colType = iota // BIGINT, DELTA_BINARY_PACKED
	colInt32                 // INTEGER, DELTA_BINARY_PACKED
	colBool                  // BOOLEAN
	colDouble                // DOUBLE
	colDict                  // VARCHAR, dictionary-encoded: few distinct values (arm, label)
	colText                  // VARCHAR, DELTA_BYTE_ARRAY: long, mostly distinct values (checkpoint JSON)
)

// colSpec declares one column of a table.
type colSpec struct {
	name string
	typ  colType
	// nullable: the column may hold nulls in every file (a declared
	// nullable field); other columns are nullable in a file only when
	// that file holds a null in them.
	nullable bool
	// omittable: a file whose values in the column are all null leaves
	// the column out (the error text, agents' details, cost fields the
	// world does not report); readers see NULL (DuckDB's union_by_name,
	// the views).
	omittable bool
	// expected: an omittable column present in files without errors (a
	// cost field the world reports).
	expected bool
}

// A file's layout is decided by its content, so that the same rows always
// make the same bytes whoever wrote them and however (streamed by a
// built-in world's sweep, or buffered whole for an agent's): a column is
// left out when it is omittable and all null, and is nullable when it is
// declared so or holds a null. Most files hold no error rows: their
// columns are required, which parquet-go writes several times faster.

// fileLayout is the schema of one file: which of its table's columns it
// holds, which of them nullable, and the writer options.
type fileLayout struct {
	present  []bool // by table column
	nullable []bool // by table column
	index    []int  // table column -> file column, -1 if absent
	opts     []parquet.WriterOption
}

// layout is a table's columns, and the file layouts made so far.
type layout struct {
	table string
	cols  []colSpec
	mu    sync.Mutex
	files map[string]*fileLayout
}

func newLayout(table string, cols []colSpec) (*layout, error) {
	seen := map[string]bool{}
	for _, c := range cols {
		if seen[c.name] {
			return nil, fmt.Errorf("table %s: column %q twice", table, c.name)
		}
		seen[c.name] = true
	}
	return &layout{table: table, cols: cols, files: map[string]*fileLayout{}}, nil
}

// index returns the position of the named column, or -1.
func (l *layout) index(name string) int {
	for i, c := range l.cols {
		if c.name == name {
			return i
		}
	}
	return -1
}

// fileLayout returns (and caches) the file layout with the given columns
// present and nullable.
func (l *layout) fileLayout(present, nullable []bool) (*fileLayout, error) {
	var key strings.Builder
	for i := range l.cols {
		switch {
		case !present[i]:
			key.WriteByte('-')
		case nullable[i]:
			key.WriteByte('?')
		default:
			key.WriteByte('!')
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if fl, ok := l.files[key.String()]; ok {
		return fl, nil
	}
	fl := &fileLayout{present: append([]bool{}, present...), nullable: append([]bool{}, nullable...), index: make([]int, len(l.cols))}
	var fields []reflect.StructField
	wide := false
	var names []string
	for i, c := range l.cols {
		if !present[i] {
			fl.index[i] = -1
			continue
		}
		fl.index[i] = len(fields)
		var t reflect.Type
		tag := c.name
		switch c.typ {
		case colInt64:
			t, tag = reflect.TypeFor[int64](), tag+",delta"
		case colInt32:
			t, tag = reflect.TypeFor[int32](), tag+",delta"
		case colBool:
			t = reflect.TypeFor[bool]()
		case colDouble:
			t = reflect.TypeFor[float64]()
		case colDict:
			t, tag = reflect.TypeFor[string](), tag+",dict"
		case colText:
			t, wide = reflect.TypeFor[string](), true
		}
		if nullable[i] {
			tag += ",optional"
		}
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("C%d", i), Type: t, Tag: reflect.StructTag(fmt.Sprintf("parquet:%q", tag))})
		names = append(names, c.name)
	}
	schema := parquet.SchemaOf(reflect.New(reflect.StructOf(fields)).Elem().Interface())
	for i, leaf := range schema.Columns() {
		if len(leaf) != 1 || leaf[0] != names[i] {
			return nil, fmt.Errorf("table %s: column %d is %v in the schema, want %s", l.table, i, leaf, names[i])
		}
	}
	fl.opts = []parquet.WriterOption{
		schema,
		parquet.Compression(&zstdFastest),
		parquet.CreatedBy("forklab", "", ""),
		parquet.DataPageStatistics(false),
		parquet.DefaultEncodingFor(parquet.ByteArray, &deltaBytes),
	}
	if !wide {
		fl.opts = append(fl.opts, parquet.PageBufferSize(64<<10))
	}
	for i, c := range l.cols {
		if present[i] && (c.typ == colDict || c.typ == colText) {
			fl.opts = append(fl.opts, parquet.SkipPageBounds(c.name))
		}
	}
	l.files[key.String()] = fl
	return fl, nil
}

// colBuf holds the values of one column not yet handed to the Parquet
// writer: the typed slice of its colType, and which rows are null.
type colBuf struct {
	i64   []int64
	i32   []int32
	b     []bool
	f     []float64
	s     []string
	null  []bool
	nulls int // nulls among the buffered values (buffered mode: in the file)
}

// rowGroupRows bounds the rows of a row group.
const rowGroupRows = 1 << 17

// errRedo reports a streamed file whose content left the layout it was
// started with (an error row, a null where none was expected): the unit
// must be written again in buffered mode.
var errRedo = errors.New("the file's rows need another layout")

// tableFile writes one table file's rows into a temporary file that a
// syncer renames into place once synced. Rows are added a column at a time
// with the put methods, in column order; end closes the row. Its buffers
// are reused across files.
//
// In streamed mode (a built-in world's sweep) the file is started with the
// layout of files without errors and rows go to the writer in batches; a
// row that does not fit makes end return errRedo. In buffered mode (an
// agent's sweep, or a redo) every row is kept until commit, which picks
// the layout from the content and replays the rows in the same batches,
// so both modes make the same bytes for the same rows.
type tableFile struct {
	l         *layout
	path, tmp string
	f         *os.File
	w         *parquet.GenericWriter[any]
	fl        *fileLayout
	buffered  bool
	bad       bool // streamed: a value did not fit the layout
	cols      []colBuf
	vals      []parquet.Value
	rows      int // rows buffered
	batch     int // rows per batch handed to the writer
	inGroup   int // rows written to the current row group
	n         int64
}

// batchRows is how many rows a table buffers before handing them to the
// Parquet writer, unless the table says otherwise.
const batchRows = 4096

func newTableFile(l *layout, batch int) *tableFile {
	if batch == 0 {
		batch = batchRows
	}
	return &tableFile{l: l, cols: make([]colBuf, len(l.cols)), batch: batch}
}

// open starts the file dir/name (as a hidden temporary file), streamed or
// buffered.
func (t *tableFile) open(dir, name string, buffered bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t.path = filepath.Join(dir, name)
	t.tmp = filepath.Join(dir, "."+name+".tmp")
	t.buffered, t.bad = buffered, false
	t.rows, t.inGroup, t.n = 0, 0, 0
	for i := range t.cols {
		c := &t.cols[i]
		c.i64, c.i32, c.b, c.f, c.s, c.null, c.nulls = c.i64[:0], c.i32[:0], c.b[:0], c.f[:0], c.s[:0], c.null[:0], 0
	}
	if buffered {
		return nil
	}
	// The layout of a file without error rows.
	present := make([]bool, len(t.l.cols))
	nullable := make([]bool, len(t.l.cols))
	for i, c := range t.l.cols {
		present[i] = !c.omittable || c.expected
		nullable[i] = c.nullable
	}
	fl, err := t.l.fileLayout(present, nullable)
	if err != nil {
		return err
	}
	return t.start(fl)
}

// start creates the temporary file and its writer with layout fl.
func (t *tableFile) start(fl *fileLayout) error {
	f, err := os.Create(t.tmp)
	if err != nil {
		return err
	}
	t.f, t.fl = f, fl
	// A fresh writer per file: a Reset writer carries state from its last
	// file into the next one's bytes, and the files must not depend on
	// which worker wrote what before.
	t.w = parquet.NewGenericWriter[any](f, fl.opts...)
	return nil
}

// The put methods append one value to column i of the current row.

func (t *tableFile) putInt64(i int, v int64) { t.cols[i].i64 = append(t.cols[i].i64, v); t.notNull(i) }
func (t *tableFile) putInt32(i int, v int32) { t.cols[i].i32 = append(t.cols[i].i32, v); t.notNull(i) }
func (t *tableFile) putBool(i int, v bool)   { t.cols[i].b = append(t.cols[i].b, v); t.notNull(i) }
func (t *tableFile) putDouble(i int, v float64) {
	t.cols[i].f = append(t.cols[i].f, v)
	t.notNull(i)
}

// putString appends s; the string must stay valid until the table next
// flushes (after end reports a flush), when the writer copies it.
func (t *tableFile) putString(i int, s string) { t.cols[i].s = append(t.cols[i].s, s); t.notNull(i) }

// putNull appends a null to column i. A streamed file keeps nothing for
// a column it leaves out.
func (t *tableFile) putNull(i int) {
	if !t.buffered {
		if !t.fl.present[i] {
			return
		}
		if !t.fl.nullable[i] {
			if !t.bad && debugLayout {
				fmt.Fprintf(os.Stderr, "forklab: null in required %s.%s\n", t.l.table, t.l.cols[i].name)
			}
			t.bad = true
			return
		}
	}
	c := &t.cols[i]
	switch t.l.cols[i].typ {
	case colInt64:
		c.i64 = append(c.i64, 0)
	case colInt32:
		c.i32 = append(c.i32, 0)
	case colBool:
		c.b = append(c.b, false)
	case colDouble:
		c.f = append(c.f, 0)
	default:
		c.s = append(c.s, "")
	}
	c.null = append(c.null, true)
	c.nulls++
}

// notNull records that column i's new value is not null: in the null
// mask of a buffered file, or of a streamed file's nullable column. A
// streamed file that left column i out cannot take the value.
func (t *tableFile) notNull(i int) {
	if t.buffered {
		t.cols[i].null = append(t.cols[i].null, false)
		return
	}
	if t.fl.nullable[i] {
		t.cols[i].null = append(t.cols[i].null, false)
	} else if !t.fl.present[i] {
		if !t.bad && debugLayout {
			fmt.Fprintf(os.Stderr, "forklab: value in left-out %s.%s\n", t.l.table, t.l.cols[i].name)
		}
		t.bad = true
	}
}

// debugLayout prints why a streamed file is redone (FORKLAB_DEBUG_LAYOUT).
var debugLayout = os.Getenv("FORKLAB_DEBUG_LAYOUT") != ""

// end closes a row. It reports whether the buffered rows went to the
// Parquet writer, which copies what they point to: after a flush, memory
// the buffered strings pointed into may be reused. A streamed file whose
// row did not fit its layout returns errRedo.
func (t *tableFile) end() (flushed bool, err error) {
	t.rows++
	if t.bad {
		return false, errRedo
	}
	if t.buffered {
		return false, nil
	}
	if t.rows >= t.batch || t.inGroup+t.rows >= rowGroupRows {
		return true, t.flush(0, t.rows)
	}
	return false, nil
}

// flush hands rows [lo, hi) of the buffers to the writer, column by column,
// and ends the row group when it is full. In streamed mode it empties the
// buffers.
func (t *tableFile) flush(lo, hi int) error {
	n := hi - lo
	if n == 0 {
		return nil
	}
	if cap(t.vals) < n {
		t.vals = make([]parquet.Value, n)
	}
	cws := t.w.ColumnWriters()
	for i := range t.cols {
		fi := t.fl.index[i]
		if fi < 0 {
			continue
		}
		c := &t.cols[i]
		vals := t.vals[:n]
		switch t.l.cols[i].typ {
		case colInt64:
			for j, v := range c.i64[lo:hi] {
				vals[j] = parquet.Int64Value(v)
			}
		case colInt32:
			for j, v := range c.i32[lo:hi] {
				vals[j] = parquet.Int32Value(v)
			}
		case colBool:
			for j, v := range c.b[lo:hi] {
				vals[j] = parquet.BooleanValue(v)
			}
		case colDouble:
			for j, v := range c.f[lo:hi] {
				vals[j] = parquet.DoubleValue(v)
			}
		default:
			for j, v := range c.s[lo:hi] {
				vals[j] = parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(v), len(v)))
			}
		}
		if t.fl.nullable[i] {
			for j, isNull := range c.null[lo:hi] {
				if isNull {
					vals[j] = parquet.NullValue()
				} else {
					vals[j].SetDefinitionLevel(1)
				}
			}
		}
		if _, err := cws[fi].WriteRowValues(vals); err != nil {
			return fmt.Errorf("%s: column %s: %w", t.path, t.l.cols[i].name, err)
		}
	}
	clear(t.vals[:n])
	t.n += int64(n)
	t.inGroup += n
	if !t.buffered {
		t.reset()
	}
	if t.inGroup >= rowGroupRows {
		t.inGroup = 0
		return t.w.Flush()
	}
	return nil
}

// reset empties the buffers after a streamed flush.
func (t *tableFile) reset() {
	for i := range t.cols {
		c := &t.cols[i]
		clear(c.s) // drop references to strings
		c.i64, c.i32, c.b, c.f, c.s, c.null, c.nulls = c.i64[:0], c.i32[:0], c.b[:0], c.f[:0], c.s[:0], c.null[:0], 0
	}
	t.rows = 0
}

// commit finishes the file and hands it to s, which syncs it and renames
// it into place, then calls done with its description. A buffered file
// picks its layout from its content here and writes its rows in the
// batches a streamed file would have.
func (t *tableFile) commit(s *syncer, done func(fileInfo)) error {
	if t.buffered {
		present := make([]bool, len(t.l.cols))
		nullable := make([]bool, len(t.l.cols))
		for i, c := range t.l.cols {
			allNull := t.cols[i].nulls == t.rows
			present[i] = !(c.omittable && allNull)
			nullable[i] = c.nullable || t.cols[i].nulls > 0
		}
		fl, err := t.l.fileLayout(present, nullable)
		if err != nil {
			return err
		}
		if err := t.start(fl); err != nil {
			return err
		}
		// The batches a streamed file makes: batch rows, cut at row
		// group boundaries.
		for lo, group := 0, 0; lo < t.rows; {
			hi := min(lo+t.batch, t.rows, lo+rowGroupRows-group)
			if err := t.flush(lo, hi); err != nil {
				return err
			}
			group = (group + hi - lo) % rowGroupRows
			lo = hi
		}
		t.reset()
	} else if err := t.flush(0, t.rows); err != nil {
		return err
	}
	if err := t.w.Close(); err != nil {
		return err
	}
	s.commit(t.f, t.tmp, t.path, t.n, done)
	t.f = nil
	return nil
}

func (t *tableFile) abort() {
	if t.f != nil {
		t.f.Close()
		os.Remove(t.tmp)
		t.f = nil
	}
	t.reset()
}

// putValue appends a declared value to column i: bools, ints, floats and
// enums as their column types, nulls as null.
func (t *tableFile) putValue(i int, null bool, typ colType, iv int64, fv float64, sv string) {
	if null {
		t.putNull(i)
		return
	}
	switch typ {
	case colBool:
		t.putBool(i, iv != 0)
	case colInt64:
		t.putInt64(i, iv)
	case colDouble:
		t.putDouble(i, fv)
	default:
		t.putString(i, sv)
	}
}
