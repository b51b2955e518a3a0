package recorded_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/recorded"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/pipeline/sessions/sessiontest"
	"github.com/forklab/forklab/pipeline/world"
	_ "github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/stream/client"
)

// golden is the equivalence test's population: the checkpoints forklab
// checkpoint --seed S --fork-at 3 prints for S in 0..299, as records
// {"run_id":"rS","checkpoint":…}.
const golden = "../../../testdata/runs/counter-0-300-at-3.jsonl"

func counter(t testing.TB) world.Declaration {
	t.Helper()
	def, err := lab.Lookup("counter")
	if err != nil {
		t.Fatal(err)
	}
	return def.Declaration()
}

// readAll reads positions [lo, hi) and returns each record's run id, seed
// (-1: none), fork step and checkpoint.
func readAll(t *testing.T, s recorded.Source, lo, hi uint64) (ids []string, steps []int, cps []string) {
	t.Helper()
	next, done, err := s.Read(context.Background(), lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	for want := lo; ; want++ {
		rec, err := next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rec == nil {
			if want != hi {
				t.Fatalf("read %d:%d ended at %d", lo, hi, want)
			}
			return
		}
		if rec.Pos != want {
			t.Fatalf("record at position %d, want %d", rec.Pos, want)
		}
		ids = append(ids, rec.RunID)
		steps = append(steps, rec.Forks[0].ForkStep)
		cps = append(cps, string(rec.Forks[0].Checkpoint))
	}
}

// A JSON Lines file is listed with its size, CRC-32C, run count and fork
// steps, and any range of it reads back its records in order, across the
// blocks it is indexed by.
func TestJSONLListsAndReads(t *testing.T) {
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	// Blank lines, CRLF endings and a last line without a newline are
	// records' business too.
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var text strings.Builder
	for i, l := range lines {
		if i%50 == 7 {
			text.WriteString("\n  \n")
		}
		text.WriteString(l)
		if i < len(lines)-1 {
			text.WriteString("\r\n")
		}
	}
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := os.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := recorded.Open(context.Background(), path, recorded.Options{Decl: counter(t), Builtin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := s.Listing()
	crc := fmt.Sprintf("%08x", crc32.Checksum([]byte(text.String()), crc32.MakeTable(crc32.Castagnoli)))
	if l.Format != "jsonl" || l.Runs != 300 || l.Bytes != int64(text.Len()) || l.CRC32C != crc || fmt.Sprint(l.ForkSteps) != "[3]" || l.Metadata {
		t.Fatalf("listing %+v, want jsonl, 300 runs, %d bytes, crc32c %s, fork steps [3], no metadata", l, text.Len(), crc)
	}
	for _, r := range [][2]uint64{{0, 300}, {70, 150}, {64, 128}, {299, 300}, {5, 6}} {
		ids, _, cps := readAll(t, s, r[0], r[1])
		for k, id := range ids {
			p := r[0] + uint64(k)
			if id != fmt.Sprintf("r%d", p) || !strings.Contains(cps[k], fmt.Sprintf(`"seed":%d,`, p)) {
				t.Fatalf("read %d:%d: position %d is run %s with %.80s…", r[0], r[1], p, id, cps[k])
			}
		}
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// The bad files of testdata/runs/bad.txt found while listing are refused
// by Open with the error the table gives; the others list (their records
// are refused when forked: cmd/forklab's TestRunsBadInput).
func TestRecordedBadFiles(t *testing.T) {
	f, err := os.Open("../../../testdata/runs/bad.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if sc.Text() == "" || strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		c := strings.Split(sc.Text(), "\t")
		n++
		t.Run(c[0], func(t *testing.T) {
			_, err := recorded.Open(context.Background(), "../../../testdata/runs/bad/"+c[0], recorded.Options{Decl: counter(t), Builtin: true})
			if c[1] == "run" {
				if err != nil {
					t.Fatalf("listed with an error, want one only when forked: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c[3]) {
				t.Fatalf("error %v, want one saying %q", err, c[3])
			}
			if !errors.Is(err, lab.ErrRecord) && !strings.Contains(c[3], "holds no record") {
				t.Errorf("error %v is not a lab.ErrRecord", err)
			}
		})
	}
	if n < 10 {
		t.Fatalf("bad.txt holds %d cases", n)
	}
}

// A file written to after it was listed is refused when a unit reads the
// block that changed, naming its lines, and by Check.
func TestJSONLChangedWhileRead(t *testing.T) {
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := recorded.Open(context.Background(), path, recorded.Options{Decl: counter(t), Builtin: true})
	if err != nil {
		t.Fatal(err)
	}
	// Record 200 (line 201) edited in place, same length.
	i := strings.Index(string(b), `"run_id":"r200"`)
	edited := []byte(string(b[:i]) + `"run_id":"x200"` + string(b[i+len(`"run_id":"r200"`):]))
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	readAll(t, s, 0, 100) // blocks before the edit are as listed
	next, done, err := s.Read(context.Background(), 150, 250)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	for {
		rec, err := next(context.Background())
		if err != nil {
			if !errors.Is(err, recorded.ErrChanged) || !strings.Contains(err.Error(), "lines 193 to 256 are not the bytes that were listed") {
				t.Fatalf("error %v, want the change of lines 193 to 256", err)
			}
			break
		}
		if rec == nil {
			t.Fatal("the edited block read without an error")
		}
	}
	if err := s.Check(); !errors.Is(err, recorded.ErrChanged) {
		t.Fatalf("Check: %v, want ErrChanged", err)
	}
}

// A record's other keys are its metadata, sorted by name, values as they
// are; a JSON string checkpoint is the JSON it holds (a checkpoints
// table's column); an agent's record without a fork step takes the
// sweep's one step.
func TestRecordFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.jsonl")
	text := `{"run_id":"a","checkpoint":"{\"x\": 1}","zone":"eu","features":{"f":true},"attempt":{"n":2, "ok":false}}` + "\n" +
		`{"run_id":"b","checkpoint":[1,2],"fork_step":4,"seed":12}` + "\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	decl := world.Declaration{Name: "agentworld", Version: "1"}
	if _, err := recorded.Open(context.Background(), path, recorded.Options{Decl: decl}); err == nil || !strings.Contains(err.Error(), "line 1 (run a): no fork_step") {
		t.Fatalf("a record without a fork step and no --fork-at: %v", err)
	}
	s, err := recorded.Open(context.Background(), path, recorded.Options{Decl: decl, ForkAt: []int{2, 4}, NeedFeatures: false})
	if err == nil {
		t.Fatal("two fork steps given, and a record without one: listed")
	}
	s, err = recorded.Open(context.Background(), path, recorded.Options{Decl: decl, ForkAt: []int{4}})
	if err != nil {
		t.Fatal(err)
	}
	if l := s.Listing(); !l.Metadata || fmt.Sprint(l.ForkSteps) != "[4]" {
		t.Fatalf("listing %+v", l)
	}
	next, done, err := s.Read(context.Background(), 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	a, err := next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Metadata) != `{"attempt":{"n":2,"ok":false},"zone":"eu"}` || string(a.Forks[0].Checkpoint) != `{"x": 1}` ||
		a.Forks[0].ForkStep != 4 || string(a.Forks[0].Features) != `{"f":true}` || a.Seed != nil {
		t.Fatalf("record a: metadata %s, checkpoint %s, step %d, features %s, seed %v", a.Metadata, a.Forks[0].Checkpoint, a.Forks[0].ForkStep, a.Forks[0].Features, a.Seed)
	}
	b, err := next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b.Metadata != nil && len(b.Metadata) != 0 || b.Seed == nil || *b.Seed != 12 || string(b.Forks[0].Checkpoint) != "[1,2]" {
		t.Fatalf("record b: metadata %s, seed %v, checkpoint %s", b.Metadata, b.Seed, b.Forks[0].Checkpoint)
	}
	if _, err := recorded.Open(context.Background(), path, recorded.Options{Decl: decl, ForkAt: []int{4}, NeedFeatures: true}); err == nil || !strings.Contains(err.Error(), "line 2 (run b): no features") {
		t.Fatalf("a record without features for an agent without inspect: %v", err)
	}
}

// A Parquet file of records (here: the golden JSON Lines copied by DuckDB,
// the checkpoint a VARCHAR column of JSON text) lists and reads as the
// JSON Lines file does; a duplicate run id names both rows.
func TestParquetListsAndReads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runs.parquet")
	db, err := duck.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`COPY (SELECT run_id, CAST(checkpoint AS VARCHAR) AS checkpoint, 'batch-' || (CAST(substr(run_id, 2) AS INTEGER) // 100) AS batch
		FROM read_json(` + duck.Quote(golden) + `, columns = {run_id: 'VARCHAR', checkpoint: 'JSON'}))
		TO ` + duck.Quote(path) + ` (FORMAT parquet, ROW_GROUP_SIZE 64)`); err != nil {
		t.Fatal(err)
	}
	s, err := recorded.Open(context.Background(), path, recorded.Options{Decl: counter(t), Builtin: true})
	if err != nil {
		t.Fatal(err)
	}
	if l := s.Listing(); l.Format != "parquet" || l.Runs != 300 || !l.Metadata || fmt.Sprint(l.ForkSteps) != "[3]" {
		t.Fatalf("listing %+v", l)
	}
	ids, _, cps := readAll(t, s, 130, 260)
	for k, id := range ids {
		p := 130 + k
		if id != fmt.Sprintf("r%d", p) || !strings.Contains(cps[k], fmt.Sprintf(`"seed":%d,`, p)) {
			t.Fatalf("position %d is run %s with %.80s…", p, id, cps[k])
		}
	}
	dup := filepath.Join(dir, "dup.parquet")
	if _, err := db.Exec(`COPY (SELECT CASE WHEN run_id = 'r9' THEN 'r3' ELSE run_id END AS run_id, checkpoint FROM read_parquet(` + duck.Quote(path) + `)) TO ` + duck.Quote(dup) + ` (FORMAT parquet)`); err != nil {
		t.Fatal(err)
	}
	if _, err := recorded.Open(context.Background(), dup, recorded.Options{Decl: counter(t), Builtin: true}); err == nil || !strings.Contains(err.Error(), `dup.parquet row 10: run_id "r3" is that of row 4 too`) {
		t.Fatalf("duplicate run id: %v", err)
	}
}

// fakeLister lists pages of runs.
type fakeLister struct{ pages [][]recorded.Run }

func (f fakeLister) ListRuns(_ context.Context, cursor string, limit int) ([]recorded.Run, string, error) {
	i := 0
	if cursor != "" {
		fmt.Sscanf(cursor, "p%d", &i)
	}
	next := ""
	if i+1 < len(f.pages) {
		next = fmt.Sprintf("p%d", i+1)
	}
	return f.pages[i], next, nil
}

// An agent's runs are listed page by page, their metadata kept; a run id
// listed twice is refused, naming both.
func TestAgentListing(t *testing.T) {
	pages := [][]recorded.Run{{{RunID: "t1", Metadata: []byte(`{"user": "ann"}`)}, {RunID: "t2"}}, {{RunID: "t3", Metadata: []byte("null")}}}
	s, err := recorded.Open(context.Background(), recorded.AgentSource, recorded.Options{Agent: fakeLister{pages}})
	if err != nil {
		t.Fatal(err)
	}
	listing := "{\"run_id\":\"t1\",\"metadata\":{\"user\":\"ann\"}}\n{\"run_id\":\"t2\",\"metadata\":null}\n{\"run_id\":\"t3\",\"metadata\":null}\n"
	if l := s.Listing(); l.Runs != 3 || l.Bytes != int64(len(listing)) || l.CRC32C != fmt.Sprintf("%08x", crc32.Checksum([]byte(listing), crc32.MakeTable(crc32.Castagnoli))) || !l.Metadata {
		t.Fatalf("listing %+v, want 3 runs of %q", l, listing)
	}
	next, done, _ := s.Read(context.Background(), 0, 1)
	defer done()
	rec, _ := next(context.Background())
	if rec.RunID != "t1" || string(rec.Metadata) != `{"user":"ann"}` || len(rec.Forks) != 0 {
		t.Fatalf("run %+v", rec)
	}
	pages[1] = append(pages[1], recorded.Run{RunID: "t2"})
	if _, err := recorded.Open(context.Background(), recorded.AgentSource, recorded.Options{Agent: fakeLister{pages}}); err == nil || !strings.Contains(err.Error(), `run_id "t2" was listed as run 2 too`) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := recorded.Open(context.Background(), recorded.AgentSource, recorded.Options{Agent: fakeLister{[][]recorded.Run{{}}}}); err == nil || !strings.Contains(err.Error(), "the agent lists no run") {
		t.Fatalf("no runs: %v", err)
	}
}

// Every stream under a prefix of the session log is a recorded run, folded
// to each fork step: its checkpoint there is the one its seed's run has
// (forklab checkpoint's); a session short of the step has an error there;
// a stream that holds no session, a prefix without streams and a log that
// does not answer are refused.
func TestLogSource(t *testing.T) {
	ctx := context.Background()
	svc := sessiontest.StartLog(t)
	base := svc.URL
	c := client.New(base)
	def, _ := lab.Lookup("counter")
	params, _ := def.Declaration().Resolve(world.Params{})
	model := fork.Model{NoTool: 0.5}
	inst, err := def.Open(params, model)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		seed  uint64
		until int
	}{{0, 0}, {1, 0}, {2, 0}, {9, 2}} {
		start := session.Start(def.Declaration(), params, model, s.seed)
		w := agent.Worker{Log: c, Stream: fmt.Sprintf("prod/s%d", s.seed), Start: &start, Until: s.until}
		if _, err := w.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Create(ctx, "junk/x", client.CreateOptions{ContentType: "application/json", Data: []byte(`[{"type":"bogus"}]`)}); err != nil {
		t.Fatal(err)
	}
	s, err := recorded.Open(ctx, base+"/v1/stream/prod/", recorded.Options{Decl: counter(t), ForkAt: []int{3}})
	if err != nil {
		t.Fatal(err)
	}
	if l := s.Listing(); l.Format != "log" || l.Runs != 4 || l.Bytes != int64(len("prod/s0\nprod/s1\nprod/s2\nprod/s9\n")) {
		t.Fatalf("listing %+v", l)
	}
	next, done, err := s.Read(ctx, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	for _, seed := range []uint64{0, 1, 2, 9} {
		rec, err := next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rec.RunID != fmt.Sprintf("prod/s%d", seed) || rec.Seed == nil || *rec.Seed != seed || len(rec.Forks) != 1 || rec.Forks[0].ForkStep != 3 {
			t.Fatalf("record %+v", rec)
		}
		if seed == 9 {
			if !strings.Contains(rec.Forks[0].Err, "stream prod/s9 has not reached fork step 3: its run has taken 2 steps and has no outcome yet") {
				t.Fatalf("a session short of the fork step: %q", rec.Forks[0].Err)
			}
			continue
		}
		want, err := inst.Checkpoint(seed, 3)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Forks[0].Checkpoint) != string(want.Checkpoint) {
			t.Fatalf("stream prod/s%d folded to\n%s\nwant\n%s", seed, rec.Forks[0].Checkpoint, want.Checkpoint)
		}
	}
	if rec, err := next(ctx); rec != nil || err != nil {
		t.Fatalf("past the end: %v %v", rec, err)
	}
	for _, tc := range []struct{ url, want string }{
		{base + "/v1/stream/none/", `no stream's name begins with "none/"`},
		{base + "/prod/", "its path does not begin with /v1/stream/"},
		{"http://127.0.0.1:1/v1/stream/prod/", "the session log did not answer"},
	} {
		if _, err := recorded.Open(ctx, tc.url, recorded.Options{Decl: counter(t), ForkAt: []int{3}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.url, err, tc.want)
		}
	}
	junk, err := recorded.Open(ctx, base+"/v1/stream/junk/", recorded.Options{Decl: counter(t), ForkAt: []int{3}})
	if err != nil {
		t.Fatal(err)
	}
	next, done2, _ := junk.Read(ctx, 0, 1)
	defer done2()
	if _, err := next(ctx); !errors.Is(err, lab.ErrRecord) || !strings.Contains(err.Error(), "stream junk/x: is not a session") {
		t.Fatalf("junk: %v", err)
	}
}
