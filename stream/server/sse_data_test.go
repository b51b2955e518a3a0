package server

import (
	"bufio"
	"bytes"
	"testing"
)

// TestWriteData: a data event splits text at every line break (CR, LF,
// CRLF) into data: lines, a line starting with a space gets "data: " so
// the parser keeps the space, and binary data is one base64 line (§5.8).
// writeData writes from the chunk without copying it; these are the bytes
// it wrote when it copied and split the chunk as a string.
func TestWriteData(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   string
		binary bool
		want   string
	}{
		{"empty", "", false, "event: data\ndata:\n\n"},
		{"one line", "hello", false, "event: data\ndata:hello\n\n"},
		{"trailing LF", "a\n", false, "event: data\ndata:a\ndata:\n\n"},
		{"LF CR CRLF", "a\nb\rc\r\nd", false, "event: data\ndata:a\ndata:b\ndata:c\ndata:d\n\n"},
		{"LF CR pair is two breaks", "a\n\rb", false, "event: data\ndata:a\ndata:\ndata:b\n\n"},
		{"trailing CR", "a\r", false, "event: data\ndata:a\ndata:\n\n"},
		{"injection", "x\n\nevent: control\ndata:{}", false, "event: data\ndata:x\ndata:\ndata:event: control\ndata:data:{}\n\n"},
		{"leading space", " a\n  b", false, "event: data\ndata:  a\ndata:   b\n\n"},
		{"binary", "\x00\xff\n", true, "event: data\ndata:AP8K\n\n"},
		{"binary empty", "", true, "event: data\ndata:\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			bw := bufio.NewWriter(&b)
			writeData(bw, []byte(tc.data), tc.binary)
			bw.Flush()
			if b.String() != tc.want {
				t.Errorf("writeData(%q) wrote %q, want %q", tc.data, b.String(), tc.want)
			}
		})
	}
}
