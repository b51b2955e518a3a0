package sweep

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
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

// colSpec declares one column of a table file.
type colSpec struct {
	name     string
	typ      colType
	nullable bool
}

// layout is the schema of a table file, built from column specs in their
// order (parquet.Group would sort them by name; a struct type keeps them as
// declared), with the writer options every file of the table uses.
type layout struct {
	cols   []colSpec
	schema *parquet.Schema
	opts   []parquet.WriterOption
}

// newLayout makes the layout of cols. Column names must be unique.
func newLayout(table string, cols []colSpec) (*layout, error) {
	fields := make([]reflect.StructField, len(cols))
	wide := false
	seen := map[string]bool{}
	for i, c := range cols {
		if seen[c.name] {
			return nil, fmt.Errorf("table %s: column %q twice", table, c.name)
		}
		seen[c.name] = true
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
		if c.nullable {
			tag += ",optional"
		}
		fields[i] = reflect.StructField{Name: fmt.Sprintf("C%d", i), Type: t, Tag: reflect.StructTag(fmt.Sprintf("parquet:%q", tag))}
	}
	schema := parquet.SchemaOf(reflect.New(reflect.StructOf(fields)).Elem().Interface())
	for i, leaf := range schema.Columns() {
		if len(leaf) != 1 || leaf[0] != cols[i].name {
			return nil, fmt.Errorf("table %s: column %d is %v in the schema, want %s", table, i, leaf, cols[i].name)
		}
	}
	opts := []parquet.WriterOption{
		schema,
		parquet.Compression(&zstdFastest),
		parquet.CreatedBy("forklab", "", ""),
		parquet.DataPageStatistics(false),
		parquet.DefaultEncodingFor(parquet.ByteArray, &deltaBytes),
	}
	if !wide {
		opts = append(opts, parquet.PageBufferSize(64<<10))
	}
	for _, c := range cols {
		if c.typ == colDict || c.typ == colText {
			opts = append(opts, parquet.SkipPageBounds(c.name))
		}
	}
	return &layout{cols: cols, schema: schema, opts: opts}, nil
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

// colBuf holds the values of one column not yet handed to the Parquet
// writer: the typed slice of its colType, and for a nullable column which
// rows are null.
type colBuf struct {
	i64  []int64
	i32  []int32
	b    []bool
	f    []float64
	s    []string
	null []bool
}

// rowGroupRows bounds the rows of a row group.
const rowGroupRows = 1 << 17

// tableFile streams one table file's rows, column by column, into a
// temporary file that a syncer renames into place once synced. Rows are
// added a column at a time with the put methods, in column order; end
// closes the row. Its buffers are reused across files.
type tableFile struct {
	l         *layout
	path, tmp string
	f         *os.File
	w         *parquet.GenericWriter[any]
	cols      []colBuf
	vals      []parquet.Value
	rows      int // rows buffered
	batch     int // rows buffered before they go to the writer
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

// open starts the file dir/name (as a hidden temporary file).
func (t *tableFile) open(dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t.path = filepath.Join(dir, name)
	t.tmp = filepath.Join(dir, "."+name+".tmp")
	f, err := os.Create(t.tmp)
	if err != nil {
		return err
	}
	t.f = f
	// A fresh writer per file: a Reset writer carries state from its last
	// file into the next one's bytes, and the files must not depend on
	// which worker wrote what before.
	t.w = parquet.NewGenericWriter[any](f, t.l.opts...)
	t.rows, t.inGroup, t.n = 0, 0, 0
	for i := range t.cols {
		c := &t.cols[i]
		c.i64, c.i32, c.b, c.f, c.s, c.null = c.i64[:0], c.i32[:0], c.b[:0], c.f[:0], c.s[:0], c.null[:0]
	}
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
// flushes (after end returns true), when the writer copies it.
func (t *tableFile) putString(i int, s string) { t.cols[i].s = append(t.cols[i].s, s); t.notNull(i) }

// putNull appends a null to nullable column i.
func (t *tableFile) putNull(i int) {
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
}

func (t *tableFile) notNull(i int) {
	if t.l.cols[i].nullable {
		t.cols[i].null = append(t.cols[i].null, false)
	}
}

// end closes a row and reports whether the buffered rows went to the
// Parquet writer, which copies what they point to: after a flush, memory
// the buffered strings pointed into may be reused.
func (t *tableFile) end() (flushed bool, err error) {
	t.rows++
	if t.rows >= t.batch || t.inGroup+t.rows >= rowGroupRows {
		return true, t.flush()
	}
	return false, nil
}

// flush hands the buffered rows to the writer, column by column, and ends
// the row group when it is full.
func (t *tableFile) flush() error {
	if t.rows == 0 {
		return nil
	}
	if cap(t.vals) < t.rows {
		t.vals = make([]parquet.Value, t.rows)
	}
	cws := t.w.ColumnWriters()
	for i := range t.cols {
		c := &t.cols[i]
		spec := t.l.cols[i]
		vals := t.vals[:t.rows]
		switch spec.typ {
		case colInt64:
			for j, v := range c.i64 {
				vals[j] = parquet.Int64Value(v)
			}
			c.i64 = c.i64[:0]
		case colInt32:
			for j, v := range c.i32 {
				vals[j] = parquet.Int32Value(v)
			}
			c.i32 = c.i32[:0]
		case colBool:
			for j, v := range c.b {
				vals[j] = parquet.BooleanValue(v)
			}
			c.b = c.b[:0]
		case colDouble:
			for j, v := range c.f {
				vals[j] = parquet.DoubleValue(v)
			}
			c.f = c.f[:0]
		default:
			for j, v := range c.s {
				vals[j] = parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(v), len(v)))
			}
			clear(c.s) // drop references to strings
			c.s = c.s[:0]
		}
		if spec.nullable {
			if len(c.null) != t.rows {
				return fmt.Errorf("%s: column %s has %d values for %d rows", t.path, spec.name, len(c.null), t.rows)
			}
			for j, isNull := range c.null {
				if isNull {
					vals[j] = parquet.NullValue()
				} else {
					vals[j].SetDefinitionLevel(1)
				}
			}
			c.null = c.null[:0]
		}
		if _, err := cws[i].WriteRowValues(vals); err != nil {
			return fmt.Errorf("%s: column %s: %w", t.path, spec.name, err)
		}
	}
	clear(t.vals[:t.rows])
	t.n += int64(t.rows)
	t.inGroup += t.rows
	t.rows = 0
	if t.inGroup >= rowGroupRows {
		t.inGroup = 0
		return t.w.Flush()
	}
	return nil
}

// commit finishes the file and hands it to s, which syncs it and renames
// it into place; done, if not nil, is called with the file's path, size and
// SHA-256 once it is in place.
func (t *tableFile) commit(s *syncer, done func(fileInfo)) error {
	err := t.flush()
	if err == nil {
		err = t.w.Close()
	}
	if err != nil {
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
}

// putValue appends a declared value of kind-mapped column i: bools,
// ints, floats and enums as their column types, nulls as null.
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

var _ = math.NaN
