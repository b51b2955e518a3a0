package recorded_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/recorded"
)

// FuzzRunsFile: a runs file is outside bytes (issue 25 G). Whatever a
// .jsonl file holds, Open either refuses it with an error that names what
// is wrong, or lists it; a listed file reads back exactly its listed
// number of records, in order, each with its own non-empty run id, or
// stops at a *lab.RecordError naming the record. Nothing panics. Seeds:
// the first lines of the equivalence test's population and every file of
// testdata/runs/bad (the table of bad files TestRunsBadInput runs).
func FuzzRunsFile(f *testing.F) {
	if g, err := os.Open(golden); err == nil {
		sc := bufio.NewScanner(g)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var lines []string
		for len(lines) < 3 && sc.Scan() {
			lines = append(lines, sc.Text())
		}
		g.Close()
		f.Add(strings.Join(lines, "\n") + "\n")
		f.Add(lines[0] + "\n" + lines[0] + "\n")
	}
	bad, _ := filepath.Glob("../../../testdata/runs/bad/*.jsonl")
	for _, p := range bad {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	f.Add("")
	f.Add("\n\n")
	f.Add(`{"run_id":"a","checkpoint":{}}`)
	decl := counter(f)
	f.Fuzz(func(t *testing.T, data string) {
		path := filepath.Join(t.TempDir(), "runs.jsonl")
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		s, err := recorded.Open(ctx, path, recorded.Options{Decl: decl, Builtin: true})
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("an empty error for %q", data)
			}
			return
		}
		defer s.Close()
		l := s.Listing()
		if l.Runs == 0 || l.Bytes != int64(len(data)) {
			t.Fatalf("listed %d runs, %d bytes, of a %d-byte file", l.Runs, l.Bytes, len(data))
		}
		next, done, err := s.Read(ctx, 0, l.Runs)
		if err != nil {
			if !errors.Is(err, lab.ErrRecord) {
				t.Fatalf("read: %v", err)
			}
			return
		}
		defer done()
		seen := map[string]bool{}
		for want := uint64(0); ; want++ {
			rec, err := next(ctx)
			if err != nil {
				if !errors.Is(err, lab.ErrRecord) {
					t.Fatalf("record %d: %v", want, err)
				}
				return
			}
			if rec == nil {
				if want != l.Runs {
					t.Fatalf("read %d records of %d listed", want, l.Runs)
				}
				return
			}
			if rec.Pos != want || rec.RunID == "" || seen[rec.RunID] {
				t.Fatalf("record %d: position %d, run id %q (seen before: %t)", want, rec.Pos, rec.RunID, seen[rec.RunID])
			}
			seen[rec.RunID] = true
		}
	})
}
