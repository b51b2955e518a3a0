// Package jsonkeys checks that a Go type encodes to JSON with snake_case
// keys only, as every file and output forklab writes does (the manifest,
// policy.json, checkpoints, session events, --json lines, ledger and
// queue records): a struct field without a json tag would come out with
// Go's capitalised name ("Steps"). Tests of the packages that write JSON
// call Check on the types they write.
package jsonkeys

import (
	"encoding"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
)

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

var (
	marshaler     = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// Check walks t (structs, pointers, slices, arrays, map values) and returns
// the path of every exported struct field whose JSON key is not snake_case,
// as "Manifest.Cost.Steps: key \"Steps\"". Types with their own MarshalJSON
// or MarshalText are trusted; a map's keys are data, not checked.
func Check(t reflect.Type) []string {
	var bad []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) ||
			t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				walk(f.Type, path) // embedded: its fields are promoted
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if !snake.MatchString(name) {
				bad = append(bad, path+"."+f.Name+": key \""+name+"\"")
			}
			walk(f.Type, path+"."+f.Name)
		}
	}
	walk(t, t.Name())
	return bad
}
