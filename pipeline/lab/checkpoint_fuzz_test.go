package lab_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// A checkpoint is a file a user hands forklab fork (or an agent hands
// back): outside bytes, one fuzz target per built-in world. Seeds are the
// world's own checkpoints and testdata/fuzz/FuzzCheckpoint<World>/ beside
// this file (a failing input found goes there).

func FuzzCheckpointCounter(f *testing.F)  { fuzzCheckpoint(f, counter.Definition) }
func FuzzCheckpointToolloop(f *testing.F) { fuzzCheckpoint(f, toolloop.Definition) }

// fuzzCheckpoint: any bytes given as a checkpoint of def's world are
// refused (fork.ErrCheckpoint, or an arm the world does not have) or are
// a checkpoint the world's own run reaches, whose branch is the same
// every time it is played.
func fuzzCheckpoint(f *testing.F, def lab.Definition) {
	d := def.Declaration()
	params, err := d.Resolve(nil)
	if err != nil {
		f.Fatal(err)
	}
	inst, err := def.Open(params, fork.Model{Temperature: 0.3, NoTool: 0.2})
	if err != nil {
		f.Fatal(err)
	}
	for seed := uint64(0); seed < 3; seed++ {
		for step := 1; step <= 3; step++ {
			cp, err := inst.Checkpoint(seed, step)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(cp.Checkpoint, uint8(seed+uint64(step)), uint8(step))
		}
	}
	f.Add([]byte(`{"checkpoint_version":2,"world":"`+d.Name+`","world_version":"`+d.Version+`","params":{},"model":{},"fork_step":1,"history":[],"state":{}}`), uint8(0), uint8(0))
	f.Add([]byte(`{"world":"`+d.Name+`"}`), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, arm, replica uint8) {
		if name, _, err := fork.PeekWorld(b); err == nil && name != d.Name {
			return // forklab fork opens the world the checkpoint names
		}
		a := fork.Arms[int(arm)%len(fork.Arms)]
		rule := func(vs []world.Value) bool { return len(vs)%2 == 0 }
		o, err := inst.Branch(b, a, int(replica%8), rule)
		if err != nil {
			if !errors.Is(err, fork.ErrCheckpoint) && supports(d, a) {
				t.Fatalf("checkpoint refused without ErrCheckpoint: %v", err)
			}
			return
		}
		again, err := inst.Branch(b, a, int(replica%8), rule)
		if err != nil || !reflect.DeepEqual(o, again) {
			t.Fatalf("the same branch played twice: %+v, then %+v (%v)", o, again, err)
		}
		if name, version, err := fork.PeekWorld(b); err != nil || name != d.Name || version != d.Version || o.ForkStep < 1 {
			t.Fatalf("a checkpoint of %q version %q at fork step %d was taken as world %s %s's (%v)", name, version, o.ForkStep, d.Name, d.Version, err)
		}
	})
}

// supports reports whether world d has arm a (off always).
func supports(d world.Declaration, a fork.Arm) bool {
	if a == fork.Off || a == fork.AA {
		return true
	}
	for _, s := range d.Arms() {
		if s == string(a) {
			return true
		}
	}
	return false
}
