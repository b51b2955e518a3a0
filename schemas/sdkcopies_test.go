package schemas

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"testing"
)

// The Python SDK validates its replies against copies of the protocol's
// schemas, bundled in its package (sdk/python/forklab_agent/schemas): they
// must be exactly the files of schemas/agent-protocol, none missing, none
// extra.
func TestPythonSDKSchemas(t *testing.T) {
	const copies, resync = "../sdk/python/forklab_agent/schemas", "make sdk-python-schemas"
	want := map[string][]byte{}
	files, err := fs.Glob(AgentProtocol, "agent-protocol/*.schema.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no schemas: %v", err)
	}
	for _, f := range files {
		b, err := fs.ReadFile(AgentProtocol, f)
		if err != nil {
			t.Fatal(err)
		}
		want[path.Base(f)] = b
	}
	got, err := filepath.Glob(filepath.Join(copies, "*.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range got {
		name := filepath.Base(f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		switch w, ok := want[name]; {
		case !ok:
			t.Errorf("%s/%s is not a schema of schemas/agent-protocol: run %s", copies, name, resync)
		case !bytes.Equal(b, w):
			t.Errorf("%s/%s differs from schemas/agent-protocol/%s: run %s", copies, name, name, resync)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("%s lacks %s of schemas/agent-protocol: run %s", copies, name, resync)
	}
}
