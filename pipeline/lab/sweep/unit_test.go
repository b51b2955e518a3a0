package sweep_test

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// UnitAt and UnitSeq are inverses over every unit of a grid, in the order
// Units gives; past the last unit there is none.
func TestUnitSeq(t *testing.T) {
	r, err := noisySpec(1).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	r.Units(func(u sweep.Unit) bool {
		if got := r.UnitSeq(u); got != seq {
			t.Fatalf("UnitSeq(%v) = %d, want %d", u, got, seq)
		}
		if got, ok := r.UnitAt(seq); !ok || got != u {
			t.Fatalf("UnitAt(%d) = %v %v, want %v", seq, got, ok, u)
		}
		seq++
		return true
	})
	if seq != r.UnitCount() || seq != 6 {
		t.Fatalf("%d units, UnitCount %d, want 6 (2 configurations × 3)", seq, r.UnitCount())
	}
	if u, ok := r.UnitAt(seq); ok {
		t.Fatalf("UnitAt(%d) past the last = %v", seq, u)
	}
}

// Units written one at a time by several writers into one staging
// directory — in any order, some of them twice and at the same moment, as
// a redelivered unit of a distributed sweep is — finish into the files of
// an undivided sweep; temporary files a killed writer left are not
// published.
func TestUnitWritersShareStaging(t *testing.T) {
	spec := noisySpec(1)
	want := tableFiles(t, runSweep(t, spec, sweep.Options{}))
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	var units []sweep.Unit
	r.Units(func(u sweep.Unit) bool { units = append(units, u); return true })
	order := rand.New(rand.NewPCG(1, 2)).Perm(len(units))
	// Every unit twice: writer k takes the order from position k on.
	var wg sync.WaitGroup
	for k := range 3 {
		wg.Go(func() {
			st, err := sweep.StageShared(out, false)
			if err != nil {
				t.Error(err)
				return
			}
			uw, err := sweep.NewUnitWriter(r, st, sweep.Options{})
			if err != nil {
				t.Error(err)
				return
			}
			defer uw.Close()
			for i := range len(units) * 2 / 3 {
				u := units[order[(k*len(units)/3+i)%len(units)]]
				e, err := uw.Write(context.Background(), u)
				if err != nil {
					t.Error(err)
					return
				}
				if e.Unit != u || len(e.Files) != 7 {
					t.Errorf("entry of %v: unit %v, %d files, want 7 (tasks, and 3 tables × 2 fork steps)", u, e.Unit, len(e.Files))
				}
			}
		})
	}
	wg.Wait()
	st, _ := sweep.StageShared(out, false)
	for _, u := range units {
		if _, ok := sweep.Finished(st, u, true); !ok {
			t.Fatalf("unit %s not finished", u.ID())
		}
	}
	// A writer killed mid-file leaves its temporary file behind.
	stale := filepath.Join(st.Dir, "pairs", "config_id=0", "fork_step=1", ".part-000000.parquet.tmp-123")
	if err := os.WriteFile(stale, []byte("half a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A unit whose file lost bytes is not finished.
	e, _ := sweep.Finished(st, units[0], false)
	victim := filepath.Join(st.Dir, filepath.FromSlash(e.Files[0].Path))
	good, _ := os.ReadFile(victim)
	os.WriteFile(victim, good[:len(good)-1], 0o644)
	if _, ok := sweep.Finished(st, units[0], false); ok {
		t.Fatal("a truncated file's unit counts as finished")
	}
	os.WriteFile(victim, good, 0o644)

	fin, err := sweep.Stage(out, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sweep.Run(context.Background(), r, fin, sweep.Options{FinalizeOnly: true}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "units written one at a time against one sweep", want, tableFiles(t, out))
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("published a temporary file: %s", p)
		}
		return err
	})
}

// panicking is the counter world whose runner panics on seed 1500.
type panicking struct{ lab.Definition }

func (p panicking) Open(params world.Params, m fork.Model) (lab.Instance, error) {
	inst, err := p.Definition.Open(params, m)
	return panickingInstance{inst}, err
}

type panickingInstance struct{ lab.Instance }

func (i panickingInstance) Runner(plan lab.Plan) (lab.Runner, error) {
	rn, err := i.Instance.Runner(plan)
	return panickingRunner{rn}, err
}

type panickingRunner struct{ lab.Runner }

func (r panickingRunner) Run(ctx context.Context, lo, hi uint64, emit func(*lab.SeedResult) error) error {
	return r.Runner.Run(ctx, lo, hi, func(res *lab.SeedResult) error {
		if res.Seed == 1500 {
			var m map[string]int
			m["seed"] = 1500 // a nil map: the world's bug
		}
		return emit(res)
	})
}

// A world that panics in a unit gives an error naming the unit and where
// it panicked, leaves no file of that unit, and the writer goes on with
// the next unit.
func TestUnitWriterRecoversPanic(t *testing.T) {
	def := panicking{counter.Definition}
	decl := def.Declaration()
	decl.Name = "panicking_counter"
	lab.Register(renamed{def, decl})
	defer lab.Unregister(decl.Name)
	spec := sweep.DefaultSpec()
	spec.World = decl.Name
	spec.Seeds = sweep.Range{Start: 0, End: 3000}
	spec.Replicas = 128 // 1024 seeds a unit
	r, err := spec.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sweep.StageShared(filepath.Join(t.TempDir(), "out"), false)
	if err != nil {
		t.Fatal(err)
	}
	uw, err := sweep.NewUnitWriter(r, st, sweep.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer uw.Close()
	bad, _ := r.UnitAt(1)
	_, err = uw.Write(context.Background(), bad)
	if !errors.Is(err, sweep.ErrPanic) || !strings.Contains(err.Error(), "unit c0-s000001 (config 0, seeds 1024:2048): panic: assignment to entry in nil map (at unit_test.go:") {
		t.Fatalf("got %v, want the panic naming the unit and the site", err)
	}
	if _, ok := sweep.Finished(st, bad, false); ok {
		t.Fatal("the unit that panicked counts as finished")
	}
	for _, seq := range []uint64{0, 2} {
		u, _ := r.UnitAt(seq)
		if _, err := uw.Write(context.Background(), u); err != nil {
			t.Fatalf("unit %s after the panic: %v", u.ID(), err)
		}
	}
	var left []string
	filepath.WalkDir(st.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.Contains(d.Name(), ".tmp-") || d.Name() == "part-000001.parquet") {
			left = append(left, p)
		}
		return err
	})
	if len(left) > 0 {
		t.Fatalf("the unit that panicked left %v", left)
	}
}
