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
	if !mayRepeat(b) {
		return nil
	}
	return check(b)
}

// mayRepeat is Check's fast path: one pass over b's bytes, comparing each
// object's keys as written. It reports false when no object of b repeats a
// key; true when one may (a key written twice, a key with an escape, whose
// written form may differ from another's of the same text, or an object of
// more than 64 keys), for check to decide and name. A checkpoint of 500
// bytes is checked in about a microsecond: decoding it token by token took
// thirty (a sweep of recorded runs checks every one).
func mayRepeat(b []byte) bool {
	type frame struct {
		object, wantKey bool
		base            int // its keys start at keys[base]
	}
	var stack []frame
	var keys [][]byte
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			j := i + 1
			escaped := false
			for ; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					escaped = true
					j++
				}
			}
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
				f := &stack[n-1]
				if escaped || len(keys)-f.base >= 64 {
					return true
				}
				k := b[i+1 : min(j, len(b))]
				for _, seen := range keys[f.base:] {
					if bytes.Equal(seen, k) {
						return true
					}
				}
				keys = append(keys, k)
				f.wantKey = false
			}
			i = j
		case '{', '[':
			stack = append(stack, frame{object: c == '{', wantKey: c == '{', base: len(keys)})
		case '}', ']':
			if n := len(stack); n > 0 {
				keys = keys[:stack[n-1].base]
				stack = stack[:n-1]
			}
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].wantKey = true
			}
		}
	}
	return false
}

// check is Check token by token, naming the repeated key with its path.
func check(b []byte) error {
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
