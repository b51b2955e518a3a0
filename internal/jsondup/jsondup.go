// Package jsondup finds a key written twice in one JSON object. encoding/json
// keeps the last value without a word ({"seeds":"0:10","seeds":"0:20"}
// sweeps 0:20), where a YAML decoder refuses the same file: forklab refuses
// it in every JSON file a user writes or edits (a spec, a policy, a
// checkpoint), naming the key.
package jsondup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Check returns an error naming the first key that appears twice in one
// object of the JSON document b, with its path ("key \"seeds\" appears
// twice" or "key \"agent.timeout\" appears twice"); nil when there is
// none, or when b is not valid JSON (the decoder's error is the caller's to
// report).
func Check(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		path   string
		key    bool // the next string token of an object is a key
		index  int
	}
	var stack []*frame
	// value is called for a token that starts or is a value: it advances
	// the enclosing frame and returns the value's path.
	value := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.object {
			f.key = true
			return f.path
		}
		p := f.path + "[" + strconv.Itoa(f.index) + "]"
		f.index++
		return p
	}
	var curKey string
	for {
		t, err := d.Token()
		if err != nil {
			return nil // the end, or malformed: not this check's to report
		}
		if len(stack) > 0 {
			f := stack[len(stack)-1]
			if s, ok := t.(string); ok && f.object && f.key {
				if f.keys[s] {
					name := s
					if f.path != "" {
						name = f.path + "." + s
					}
					return fmt.Errorf("key %q appears twice (JSON keeps the last without a word: remove one)", name)
				}
				f.keys[s] = true
				f.key = false
				curKey = s
				continue
			}
		}
		path := value()
		if len(stack) > 0 && stack[len(stack)-1].object {
			if path == "" {
				path = curKey
			} else {
				path += "." + curKey
			}
		}
		switch t {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, path: path, key: true})
		case json.Delim('['):
			stack = append(stack, &frame{path: path})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
		}
	}
}
