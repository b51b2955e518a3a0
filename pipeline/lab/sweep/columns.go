package sweep

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
// holds, which of them nullable, the slot of the row type each is written
// from (slots.go), and the writer options.
type fileLayout struct {
	present  []bool // by table column
	nullable []bool // by table column
	group    []int  // table column -> slot group, -1 if absent
	slot     []int  // table column -> slot in its group
	class    *slotClass
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
	fl := &fileLayout{present: append([]bool{}, present...), nullable: append([]bool{}, nullable...),
		group: make([]int, len(l.cols)), slot: make([]int, len(l.cols))}
	var used [numGroups]int
	tags := map[string]string{} // slot field -> parquet tag
	wide := false
	for i, c := range l.cols {
		fl.group[i], fl.slot[i] = -1, -1
		if !present[i] {
			continue
		}
		g := groupOf(c.typ, nullable[i])
		fl.group[i], fl.slot[i] = g, used[g]
		used[g]++
		tag := c.name
		switch c.typ {
		case colInt64, colInt32:
			if !nullable[i] { // parquet-go takes no delta tag on pointers
				tag += ",delta"
			}
		case colDict:
			tag += ",dict"
		case colText:
			wide = true
		}
		tags[slotField(g, fl.slot[i])] = tag
	}
	fl.class = classFor(used)
	if fl.class == nil {
		return nil, fmt.Errorf("table %s: %d columns of one type; a table holds at most %d", l.table, slices.Max(used[:]), maxSlots)
	}
	fl.opts = []parquet.WriterOption{
		parquet.Compression(&tableCodec),
		parquet.CreatedBy("forklab", "", ""),
		parquet.DataPageStatistics(false),
		parquet.DefaultEncodingFor(parquet.ByteArray, &deltaBytes),
		parquet.MaxRowsPerRowGroup(rowGroupRows),
	}
	if !wide {
		fl.opts = append(fl.opts, parquet.PageBufferSize(64<<10))
	}
	for _, f := range fl.class.fields {
		tag, ok := tags[f]
		if !ok {
			tag = "-"
		}
		fl.opts = append(fl.opts, parquet.StructTag(reflect.StructTag(fmt.Sprintf("parquet:%q", tag)), f).(parquet.WriterOption))
	}
	for i, c := range l.cols {
		if present[i] && (c.typ == colDict || c.typ == colText) {
			fl.opts = append(fl.opts, parquet.SkipPageBounds(c.name))
		}
	}
	l.files[key.String()] = fl
	return fl, nil
}

// rowGroupRows bounds the rows of a row group.
const rowGroupRows = 1 << 17

// errRedo reports a streamed file whose content left the layout it was
// started with (an error row, a null where none was expected): the unit
// must be written again in buffered mode.
var errRedo = errors.New("the file's rows need another layout")

// tableFile writes one table file's rows into a temporary file that a
// syncer renames into place once synced. Rows are added a column at a time
// with the put methods, in column order; end closes the row.
//
// In streamed mode (a built-in world's sweep) the file is started with the
// layout of files without errors, and each value goes straight into its
// slot of the current slot row (slots.go); every batch of rows goes to the
// writer. A row that does not fit the layout makes end return errRedo. In
// buffered mode (an agent's sweep, or a redo) every value is kept in typed
// column buffers until commit, which picks the layout from the content and
// writes the rows in the same batches, so both modes make the same bytes
// for the same rows.
type tableFile struct {
	l         *layout
	path, tmp string
	f         *os.File
	out       crcWriter // f, counted and checksummed
	w         rowWriter
	fl        *fileLayout
	buffered  bool
	bad       bool // streamed: a value did not fit the layout
	skipped   bool // empty, and not written (a recorded unit's fork step without runs)
	rows      int  // rows in the current batch (streamed) or file (buffered)
	batch     int  // rows per batch handed to the writer
	n         int64

	// buffered mode: the values of every column.
	cols []colBuf

	// streamed mode: the slot rows of the current batch, the current row,
	// and per table column the byte offset of its slot (-1: left out) and
	// whether the slot is a pointer (a nullable column), whose values live
	// in cols until the batch is written.
	base, cur unsafe.Pointer
	size      uintptr
	off       []int
	opt       []bool
	// fast[i] is off[i] for a streamed file's required column, -1
	// otherwise: the put methods' inlined case. gone[i] is set for a
	// column a streamed file leaves out: a null there is nothing to
	// write (putNull's inlined case).
	fast []int
	gone []bool
}

// colBuf holds one column's values: in buffered mode all of the file's,
// in streamed mode those of a nullable column's current batch, which its
// pointer slots point into.
type colBuf struct {
	i64   []int64
	i32   []int32
	b     []bool
	f     []float64
	s     []string
	null  []bool
	nulls int
}

// batchRows is how many rows a table hands to the Parquet writer at once:
// few enough that their slot rows stay in the CPU's cache.
const batchRows = 512

func newTableFile(l *layout, batch int) *tableFile {
	if batch == 0 {
		batch = batchRows
	}
	return &tableFile{l: l, cols: make([]colBuf, len(l.cols)), off: make([]int, len(l.cols)), opt: make([]bool, len(l.cols)),
		fast: make([]int, len(l.cols)), gone: make([]bool, len(l.cols)), batch: batch}
}

// open starts the file dir/name (as a hidden temporary file), streamed or
// buffered.
func (t *tableFile) open(dir, name string, buffered bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t.path = filepath.Join(dir, name)
	t.buffered, t.bad, t.skipped = buffered, false, false
	t.rows, t.n = 0, 0
	t.resetCols()
	for i := range t.fast {
		t.fast[i], t.gone[i] = -1, false
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
	if err := t.start(fl); err != nil {
		return err
	}
	t.base, t.size = t.w.buffer(t.batch)
	t.cur = t.base
	for i := range t.off {
		t.off[i], t.opt[i] = -1, false
		if g := fl.group[i]; g >= 0 {
			t.off[i] = int(fl.class.offsets[g][fl.slot[i]])
			t.opt[i] = fl.nullable[i]
			if !t.opt[i] {
				t.fast[i] = t.off[i]
			}
		} else {
			t.gone[i] = true
		}
	}
	return nil
}

// start creates the temporary file and its writer with layout fl. The
// temporary name is unique (".NAME.tmp-RANDOM"): processes that write the
// same unit at once (a distributed sweep's worker and the one its unit was
// redelivered to) each write their own file, and the last rename wins with
// the same bytes.
func (t *tableFile) start(fl *fileLayout) error {
	f, err := os.CreateTemp(filepath.Dir(t.path), "."+filepath.Base(t.path)+tmpInfix+"*")
	if err != nil {
		return err
	}
	// CreateTemp makes the file private (0600); a table is an ordinary
	// file.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	t.tmp = f.Name()
	t.f, t.fl = f, fl
	t.out = crcWriter{w: f}
	// A fresh writer per file: a Reset writer carries state from its last
	// file into the next one's bytes, and the files must not depend on
	// which worker wrote what before.
	t.w = fl.class.newWriter(&t.out, fl.opts)
	return nil
}

// slot returns where column i's value of the current row goes in a
// streamed file, or nil when the file leaves the column out (a value
// there makes the file redo).
func (t *tableFile) slot(i int) unsafe.Pointer {
	o := t.off[i]
	if o < 0 {
		if !t.bad && debugLayout {
			fmt.Fprintf(os.Stderr, "forklab: value in left-out %s.%s\n", t.l.table, t.l.cols[i].name)
		}
		t.bad = true
		return nil
	}
	return unsafe.Add(t.cur, o)
}

// The put methods set column i of the current row. Their common case — a
// streamed file's required column — is small enough to be inlined; the
// rest (buffered files, nullable or left-out columns) is putSlow.

func (t *tableFile) putInt64(i int, v int64) {
	if o := t.fast[i]; o >= 0 {
		*(*int64)(unsafe.Add(t.cur, o)) = v
	} else {
		t.putInt64Slow(i, v)
	}
}

func (t *tableFile) putInt32(i int, v int32) {
	if o := t.fast[i]; o >= 0 {
		*(*int32)(unsafe.Add(t.cur, o)) = v
	} else {
		t.putInt32Slow(i, v)
	}
}

func (t *tableFile) putBool(i int, v bool) {
	if o := t.fast[i]; o >= 0 {
		*(*bool)(unsafe.Add(t.cur, o)) = v
	} else {
		t.putBoolSlow(i, v)
	}
}

func (t *tableFile) putDouble(i int, v float64) {
	if o := t.fast[i]; o >= 0 {
		*(*float64)(unsafe.Add(t.cur, o)) = v
	} else {
		t.putDoubleSlow(i, v)
	}
}

//go:noinline
func (t *tableFile) putInt64Slow(i int, v int64) {
	c := &t.cols[i]
	if t.buffered {
		c.i64, c.null = append(c.i64, v), append(c.null, false)
		return
	}
	if p := t.slot(i); p != nil {
		c.i64 = append(c.i64, v)
		*(**int64)(p) = &c.i64[len(c.i64)-1]
	}
}

//go:noinline
func (t *tableFile) putInt32Slow(i int, v int32) {
	c := &t.cols[i]
	if t.buffered {
		c.i32, c.null = append(c.i32, v), append(c.null, false)
		return
	}
	if p := t.slot(i); p != nil {
		c.i32 = append(c.i32, v)
		*(**int32)(p) = &c.i32[len(c.i32)-1]
	}
}

//go:noinline
func (t *tableFile) putBoolSlow(i int, v bool) {
	c := &t.cols[i]
	if t.buffered {
		c.b, c.null = append(c.b, v), append(c.null, false)
		return
	}
	if p := t.slot(i); p != nil {
		c.b = append(c.b, v)
		*(**bool)(p) = &c.b[len(c.b)-1]
	}
}

//go:noinline
func (t *tableFile) putDoubleSlow(i int, v float64) {
	c := &t.cols[i]
	if t.buffered {
		c.f, c.null = append(c.f, v), append(c.null, false)
		return
	}
	if p := t.slot(i); p != nil {
		c.f = append(c.f, v)
		*(**float64)(p) = &c.f[len(c.f)-1]
	}
}

// putString sets s; the string's bytes must not change until the table
// next flushes (after end reports a flush), when the writer copies them.
func (t *tableFile) putString(i int, v string) {
	if o := t.fast[i]; o >= 0 {
		*(*string)(unsafe.Add(t.cur, o)) = v
	} else {
		t.putStringSlow(i, v)
	}
}

//go:noinline
func (t *tableFile) putStringSlow(i int, v string) {
	c := &t.cols[i]
	if t.buffered {
		c.s, c.null = append(c.s, v), append(c.null, false)
		return
	}
	if p := t.slot(i); p != nil {
		c.s = append(c.s, v)
		*(**string)(p) = &c.s[len(c.s)-1]
	}
}

// putNull sets column i of the current row to null. A streamed file keeps
// nothing for a column it leaves out; a null in a column it holds as
// required makes it redo.
func (t *tableFile) putNull(i int) {
	if !t.gone[i] {
		t.putNullSlow(i)
	}
}

//go:noinline
func (t *tableFile) putNullSlow(i int) {
	c := &t.cols[i]
	if t.buffered {
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
		return
	}
	o := t.off[i]
	switch {
	case o < 0:
	case t.opt[i]:
		*(*unsafe.Pointer)(unsafe.Add(t.cur, o)) = nil
	default:
		if !t.bad && debugLayout {
			fmt.Fprintf(os.Stderr, "forklab: null in required %s.%s\n", t.l.table, t.l.cols[i].name)
		}
		t.bad = true
	}
}

// debugLayout prints why a streamed file is redone (FORKLAB_DEBUG_LAYOUT).
var debugLayout = os.Getenv("FORKLAB_DEBUG_LAYOUT") != ""

// end closes a row. It reports whether the batch went to the Parquet
// writer, which copies what its strings point to: after a flush, memory
// those strings pointed into may be reused. A streamed file whose row did
// not fit its layout returns errRedo.
func (t *tableFile) end() (flushed bool, err error) {
	t.rows++
	if t.bad {
		return false, errRedo
	}
	if t.buffered {
		return false, nil
	}
	if t.rows >= t.batch {
		return true, t.flushStreamed()
	}
	t.cur = unsafe.Add(t.cur, t.size)
	return false, nil
}

// flushStreamed writes the current batch of a streamed file.
func (t *tableFile) flushStreamed() error {
	if t.rows == 0 {
		return nil
	}
	if err := t.w.writeN(t.rows); err != nil {
		return fmt.Errorf("%s: %w", t.path, err)
	}
	t.n += int64(t.rows)
	t.rows, t.cur = 0, t.base
	t.resetCols()
	return nil
}

// resetCols empties the column buffers.
func (t *tableFile) resetCols() {
	for i := range t.cols {
		c := &t.cols[i]
		clear(c.s) // drop references to strings
		c.i64, c.i32, c.b, c.f, c.s, c.null, c.nulls = c.i64[:0], c.i32[:0], c.b[:0], c.f[:0], c.s[:0], c.null[:0], 0
	}
}

// reserve makes room for n rows in a buffered file's column buffers, so
// that a unit of known size does not grow them again and again.
func (t *tableFile) reserve(n int) {
	if !t.buffered {
		return
	}
	for i := range t.cols {
		c := &t.cols[i]
		c.null = slices.Grow(c.null, n)
		switch t.l.cols[i].typ {
		case colInt64:
			c.i64 = slices.Grow(c.i64, n)
		case colInt32:
			c.i32 = slices.Grow(c.i32, n)
		case colBool:
			c.b = slices.Grow(c.b, n)
		case colDouble:
			c.f = slices.Grow(c.f, n)
		default:
			c.s = slices.Grow(c.s, n)
		}
	}
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
		for lo := 0; lo < t.rows; lo += t.batch {
			hi := min(lo+t.batch, t.rows)
			if err := t.w.write(t, lo, hi); err != nil {
				return fmt.Errorf("%s: %w", t.path, err)
			}
			t.n += int64(hi - lo)
		}
		t.rows = 0
		t.resetCols()
	} else if err := t.flushStreamed(); err != nil {
		return err
	}
	if err := t.w.close(); err != nil {
		return err
	}
	s.commit(t.f, t.out, t.tmp, t.path, t.n, done)
	t.f = nil
	return nil
}

// empty reports a file that holds no row.
func (t *tableFile) empty() bool { return t.n == 0 && t.rows == 0 }

func (t *tableFile) abort() {
	if t.f != nil {
		t.f.Close()
		os.Remove(t.tmp)
		t.f = nil
	}
	t.rows = 0
	t.resetCols()
}

// putValue sets a declared value of column i: bools, ints, floats and
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
