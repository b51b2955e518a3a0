package sweep

//go:generate go run ./internal/genslots

import (
	"fmt"
	"io"
	"reflect"
	"unsafe"

	"github.com/parquet-go/parquet-go"
)

// Slot rows: how a table file whose columns are known only at run time
// (the world's declaration names them) is written at the speed of a Go
// struct.
//
// parquet-go writes a struct type's rows straight from their fields into
// its column buffers; writing the same values as parquet.Value rows is
// about twice as slow. So every file is written from a row type with many
// typed fields, slots, in groups by physical type and nullability
// (slots_gen.go): the file's layout gives each of its columns a slot of its
// group, names the slot after the column through a struct tag option, and
// leaves every other slot out of the schema ("-"). A file's column order is
// therefore its columns grouped by type (int64, then int32, bool, double,
// strings; required before optional within each type) and in table order
// within a group; readers find columns by name.
//
// One writer path for every file: streamed or buffered, built-in world or
// agent, the same rows make the same bytes.

// The slot groups, in the field order of the slot row types.
const (
	gInt64 = iota
	gInt64Opt
	gInt32
	gInt32Opt
	gBool
	gBoolOpt
	gDouble
	gDoubleOpt
	gString
	gStringOpt
	numGroups
)

var groupPrefix = [numGroups]string{"I", "IP", "J", "JP", "B", "BP", "F", "FP", "S", "SP"}

// groupOf is the slot group of a column of type t.
func groupOf(t colType, optional bool) int {
	g := gString
	switch t {
	case colInt64:
		g = gInt64
	case colInt32:
		g = gInt32
	case colBool:
		g = gBool
	case colDouble:
		g = gDouble
	}
	if optional {
		g++
	}
	return g
}

func slotField(group, slot int) string { return fmt.Sprintf("%s%d", groupPrefix[group], slot) }

// slotClass is one slot row type: its slots per group, fields, their
// offsets and a writer maker.
type slotClass struct {
	slots     [numGroups]int
	size      uintptr
	fields    []string             // every field, in order
	offsets   [numGroups][]uintptr // by group and slot
	newWriter func(io.Writer, []parquet.WriterOption) rowWriter
}

// maxSlots is the most columns of one slot group a table file can hold.
const maxSlots = 128

// slotClasses are the slot row types, smallest first. A file is written
// with the smallest that holds its columns: the rows of a batch are
// written and read back while they are in the CPU's cache, and the fewer
// bytes they span the more of them stay there.
var slotClasses = []*slotClass{classOf[slotRow4](), classOf[slotRow8](), classOf[slotRow16](), classOf[slotRow128]()}

// classFor returns the smallest slot class with need[g] slots in each
// group g, or nil if none has enough.
func classFor(need [numGroups]int) *slotClass {
next:
	for _, c := range slotClasses {
		for g, n := range need {
			if n > c.slots[g] {
				continue next
			}
		}
		return c
	}
	return nil
}

// classOf makes the slot class of row type R, whose slots are the fields
// named by slotField from 0 up, per group.
func classOf[R any]() *slotClass {
	t := reflect.TypeFor[R]()
	c := &slotClass{size: t.Size()}
	for i := range t.NumField() {
		f := t.Field(i)
		c.fields = append(c.fields, f.Name)
	}
	for g := range numGroups {
		for k := 0; ; k++ {
			f, ok := t.FieldByName(slotField(g, k))
			if !ok {
				break
			}
			c.offsets[g] = append(c.offsets[g], f.Offset)
		}
		c.slots[g] = len(c.offsets[g])
		if c.slots[g] == 0 {
			panic("slot row type lacks " + slotField(g, 0))
		}
	}
	c.newWriter = func(w io.Writer, opts []parquet.WriterOption) rowWriter {
		return &slotWriter[R]{class: c, w: parquet.NewGenericWriter[R](w, opts...)}
	}
	return c
}

// rowWriter writes a table file's rows.
type rowWriter interface {
	// buffer returns the writer's slot rows for n rows (their first byte
	// and the size of a row), which a streamed file fills in place.
	buffer(n int) (unsafe.Pointer, uintptr)
	// writeN writes the first n rows of the buffer.
	writeN(n int) error
	// write fills slot rows from rows [lo, hi) of t's column buffers and
	// writes them.
	write(t *tableFile, lo, hi int) error
	close() error
}

// slotWriter writes rows of slot row type R.
type slotWriter[R any] struct {
	class *slotClass
	w     *parquet.GenericWriter[R]
	rows  []R
}

func (s *slotWriter[R]) close() error { return s.w.Close() }

func (s *slotWriter[R]) buffer(n int) (unsafe.Pointer, uintptr) {
	if cap(s.rows) < n {
		s.rows = make([]R, n)
	}
	s.rows = s.rows[:n]
	return unsafe.Pointer(unsafe.SliceData(s.rows)), s.class.size
}

func (s *slotWriter[R]) writeN(n int) error {
	_, err := s.w.Write(s.rows[:n])
	return err
}

func (s *slotWriter[R]) write(t *tableFile, lo, hi int) error {
	n := hi - lo
	if cap(s.rows) < n {
		s.rows = make([]R, n)
	}
	rows := s.rows[:n]
	base := unsafe.Pointer(unsafe.SliceData(rows))
	size := s.class.size
	fl := t.fl
	for i := range t.cols {
		g := fl.group[i]
		if g < 0 {
			continue
		}
		c := &t.cols[i]
		at := unsafe.Add(base, s.class.offsets[g][fl.slot[i]])
		switch g {
		case gInt64:
			for j, v := range c.i64[lo:hi] {
				*(*int64)(unsafe.Add(at, uintptr(j)*size)) = v
			}
		case gInt32:
			for j, v := range c.i32[lo:hi] {
				*(*int32)(unsafe.Add(at, uintptr(j)*size)) = v
			}
		case gBool:
			for j, v := range c.b[lo:hi] {
				*(*bool)(unsafe.Add(at, uintptr(j)*size)) = v
			}
		case gDouble:
			for j, v := range c.f[lo:hi] {
				*(*float64)(unsafe.Add(at, uintptr(j)*size)) = v
			}
		case gString:
			for j, v := range c.s[lo:hi] {
				*(*string)(unsafe.Add(at, uintptr(j)*size)) = v
			}
		case gInt64Opt:
			null := c.null[lo:hi]
			for j := range c.i64[lo:hi] {
				*(**int64)(unsafe.Add(at, uintptr(j)*size)) = ptrUnlessNull(&c.i64[lo+j], null[j])
			}
		case gInt32Opt:
			null := c.null[lo:hi]
			for j := range c.i32[lo:hi] {
				*(**int32)(unsafe.Add(at, uintptr(j)*size)) = ptrUnlessNull(&c.i32[lo+j], null[j])
			}
		case gBoolOpt:
			null := c.null[lo:hi]
			for j := range c.b[lo:hi] {
				*(**bool)(unsafe.Add(at, uintptr(j)*size)) = ptrUnlessNull(&c.b[lo+j], null[j])
			}
		case gDoubleOpt:
			null := c.null[lo:hi]
			for j := range c.f[lo:hi] {
				*(**float64)(unsafe.Add(at, uintptr(j)*size)) = ptrUnlessNull(&c.f[lo+j], null[j])
			}
		case gStringOpt:
			null := c.null[lo:hi]
			for j := range c.s[lo:hi] {
				*(**string)(unsafe.Add(at, uintptr(j)*size)) = ptrUnlessNull(&c.s[lo+j], null[j])
			}
		}
	}
	// The rows keep their slots' values until the next batch overwrites
	// them; slots a layout leaves out are not in its schema.
	_, err := s.w.Write(rows)
	return err
}

func ptrUnlessNull[T any](p *T, null bool) *T {
	if null {
		return nil
	}
	return p
}
