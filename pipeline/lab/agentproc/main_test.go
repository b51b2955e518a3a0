package agentproc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	_ "github.com/forklab/forklab/pipeline/worlds/counter"
)

// The test binary is also the agent the tests run: with AGENTPROC_TEST_AGENT
// set it serves a built-in world over forklab-agent/1 on its stdin and
// stdout (agentproc.Serve), with the faults AGENTPROC_TEST_FAULTS names,
// and with transcripts when AGENTPROC_TEST_TRANSCRIPTS is set.
func TestMain(m *testing.M) {
	if os.Getenv("AGENTPROC_TEST_AGENT") == "" {
		os.Exit(m.Run())
	}
	def, err := lab.Lookup(os.Getenv("AGENTPROC_TEST_AGENT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var in io.Reader = os.Stdin
	var out io.Writer = os.Stdout
	if f := os.Getenv("AGENTPROC_TEST_FAULTS"); f != "" {
		in, out = faulty(f, os.Stdin, os.Stdout)
	}
	opt := agentproc.ServeOptions{Transcripts: os.Getenv("AGENTPROC_TEST_TRANSCRIPTS") != ""}
	if err := agentproc.ServeWith(context.Background(), def, in, out, opt); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// faulty wraps the agent's input and output: a start request of a seed
// the faults name (crash=7, garbage=21 — each a seed modulo 50) crashes
// the process or makes it print a line that is not JSON; a branch request
// of a seed named by hang=13 hangs it. count=FILE appends the method and seed of every request to FILE;
// ids=FILE appends the sweep_id and branch_id of every branch asked;
// stray=N writes a line that is not JSON before every start reply from the
// Nth start request of the process on (stray=1: every one), as a stray
// print does;
// coin=1 makes every branch's success a coin flip; drop=NAME leaves a
// feature out of start replies; retype=NAME sends a feature as a string.
func faulty(spec string, in io.Reader, out io.Writer) (io.Reader, io.Writer) {
	faults := map[uint64]string{}
	var countFile, idsFile string
	stray := 0
	var edits []func(map[string]any)
	for _, kv := range strings.Split(spec, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "count":
			countFile = v
			continue
		case "ids":
			idsFile = v
			continue
		case "stray":
			stray, _ = strconv.Atoi(v)
			continue
		case "coin":
			edits = append(edits, func(r map[string]any) {
				if bs, ok := r["branches"].([]any); ok {
					for _, b := range bs {
						b.(map[string]any)["success"] = rand.IntN(2) == 0
					}
				}
			})
			continue
		case "drop", "retype":
			name, retype := v, k == "retype"
			edits = append(edits, func(r map[string]any) {
				if fs, ok := r["forks"].([]any); ok {
					for _, f := range fs {
						feats := f.(map[string]any)["features"].(map[string]any)
						if retype {
							feats[name] = fmt.Sprint(feats[name])
						} else {
							delete(feats, name)
						}
					}
				}
			})
			continue
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		faults[n] = k
	}
	if len(edits) > 0 {
		out = &editor{w: out, edits: edits}
	}
	pr, pw := io.Pipe()
	starts := 0
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			line := sc.Bytes()
			var reqs []wireRequest
			if bytes.HasPrefix(bytes.TrimSpace(line), []byte("[")) {
				json.Unmarshal(line, &reqs)
			} else {
				reqs = reqs[:0]
				var r wireRequest
				if json.Unmarshal(line, &r) == nil {
					reqs = append(reqs, r)
				}
			}
			for _, r := range reqs {
				if countFile != "" && (r.Method == "start" || r.Method == "branch") {
					f, _ := os.OpenFile(countFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
					fmt.Fprintf(f, "%s %d\n", r.Method, r.Params.Seed)
					f.Close()
				}
				if idsFile != "" && r.Method == "branch" {
					f, _ := os.OpenFile(idsFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
					for _, b := range r.Params.Branches {
						fmt.Fprintf(f, "%s %s\n", r.Params.SweepID, b.BranchID)
					}
					f.Close()
				}
				if r.Method == "start" {
					if starts++; stray > 0 && starts >= stray {
						fmt.Fprintln(out, "loading model... done")
					}
				}
				if r.Method != "start" && r.Method != "branch" {
					continue
				}
				fault := faults[r.Params.Seed%50]
				if (fault == "hang") != (r.Method == "branch") {
					fault = "" // crash and garbage on start, hang on branch
				}
				switch fault {
				case "crash":
					fmt.Fprintf(os.Stderr, "fault: crashing on seed %d\n", r.Params.Seed)
					os.Exit(3)
				case "hang":
					fmt.Fprintf(os.Stderr, "fault: hanging on seed %d\n", r.Params.Seed)
					time.Sleep(time.Hour)
				case "garbage":
					fmt.Fprintf(out, "Traceback (most recent call last): seed %d\n", r.Params.Seed)
				}
			}
			pw.Write(append(append([]byte{}, line...), '\n'))
		}
		pw.Close()
	}()
	return pr, out
}

// wireRequest is what faulty reads of a request.
type wireRequest struct {
	ID     int64  `json:"id"`
	Method string `json:"method"`
	Params struct {
		Seed     uint64 `json:"seed"`
		SweepID  string `json:"sweep_id"`
		Branches []struct {
			BranchID string `json:"branch_id"`
		} `json:"branches"`
	} `json:"params"`
}

// editor rewrites the results of the response lines written through it.
type editor struct {
	w     io.Writer
	edits []func(map[string]any)
	buf   []byte
}

func (e *editor) Write(b []byte) (int, error) {
	e.buf = append(e.buf, b...)
	for {
		i := bytes.IndexByte(e.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := e.buf[:i]
		var one map[string]any
		var many []map[string]any
		if json.Unmarshal(line, &many) == nil {
			for _, r := range many {
				e.edit(r)
			}
			line, _ = json.Marshal(many)
		} else if json.Unmarshal(line, &one) == nil {
			e.edit(one)
			line, _ = json.Marshal(one)
		}
		if _, err := e.w.Write(append(line, '\n')); err != nil {
			return 0, err
		}
		e.buf = e.buf[i+1:]
	}
}

func (e *editor) edit(resp map[string]any) {
	if r, ok := resp["result"].(map[string]any); ok {
		for _, f := range e.edits {
			f(r)
		}
	}
}

// agent is the command that runs the test binary as an agent serving
// world, with faults.
func agent(world, faults string) agentproc.Command {
	return agentproc.Command{Line: strconv.Quote(os.Args[0]),
		Env: map[string]string{"AGENTPROC_TEST_AGENT": world, "AGENTPROC_TEST_FAULTS": faults}}
}

// sweepWith runs spec into a new directory with def (nil: the built-in
// world) and returns the directory and the result.
func sweepWith(t testing.TB, spec sweep.Spec, def *agentproc.Definition, out string, resume bool, opt sweep.Options) (string, sweep.Result, error) {
	t.Helper()
	if out == "" {
		out = filepath.Join(t.TempDir(), "out")
	}
	var r sweep.Resolved
	var err error
	if def != nil {
		r, err = spec.ResolveWith(def)
	} else {
		r, err = spec.Resolve()
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := sweep.Stage(out, !resume, resume)
	if err != nil {
		t.Fatal(err)
	}
	if def != nil {
		def.SetLogDir(filepath.Join(st.Dir, "agent-logs"))
		def.SetJournal(st.JournalDir())
	}
	opt.Version = "test"
	res, err := sweep.Run(context.Background(), r, st, opt)
	if err != nil {
		st.Release()
	}
	return out, res, err
}

// tableFiles maps each Parquet file's path relative to dir to its bytes.
func tableFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".parquet" {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameFiles fails unless a and b hold the same files with the same bytes;
// only names files of the tables listed, when given.
func sameFiles(t testing.TB, what string, a, b map[string][]byte, only ...string) {
	t.Helper()
	keep := func(m map[string][]byte) map[string][]byte {
		if len(only) == 0 {
			return m
		}
		out := map[string][]byte{}
		for k, v := range m {
			for _, o := range only {
				if strings.HasPrefix(k, o+"/") {
					out[k] = v
				}
			}
		}
		return out
	}
	a, b = keep(a), keep(b)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%s: %d files against %d", what, len(a), len(b))
	}
	for name, x := range a {
		if !bytes.Equal(x, b[name]) {
			t.Errorf("%s: %s differs (%d bytes against %d)", what, name, len(x), len(b[name]))
		}
	}
}
