// Package faulty registers "faulty", a world for testing how sweeps
// spread over processes survive a unit that cannot be run: the counter
// world, except that the seed crash_seed makes its runner panic, exit the
// process (as a segfault or an out-of-memory kill would), or give up with
// an error. Only test binaries import it (forklab built with the build tag
// forklab_faultworld, and the tests of pipeline/lab/scaleout).
package faulty

import (
	"context"
	"fmt"
	"os"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
)

// Name is the world's name in the registry.
const Name = "faulty"

func init() { lab.Register(definition{}) }

type definition struct{}

// Declaration is the counter's with the two fault parameters.
func (definition) Declaration() world.Declaration {
	d := counter.Definition.Declaration()
	d.Name = Name
	d.Description = "The counter world, with a seed whose runs crash (for tests)."
	d.Params = append(append([]world.Param{}, d.Params...),
		world.Param{Name: "crash_seed", Kind: world.ParamInt, Default: int64(-1), Min: world.Bound(-1),
			Description: "the seed whose run crashes; -1 for none"},
		world.Param{Name: "crash", Kind: world.ParamEnum, Default: "panic", Values: []string{"panic", "exit", "error"},
			Description: "how it crashes: the runner panics, the process exits with status 3, or the runner gives up with an error"})
	return d
}

// Open opens the counter with the counter's parameters; its runner
// crashes at crash_seed.
func (definition) Open(params world.Params, model fork.Model) (lab.Instance, error) {
	cp := params.Clone()
	seed, _ := cp["crash_seed"].(int64)
	how, _ := cp["crash"].(string)
	delete(cp, "crash_seed")
	delete(cp, "crash")
	inst, err := counter.Definition.Open(cp, model)
	if err != nil {
		return nil, err
	}
	return instance{Instance: inst, seed: seed, how: how}, nil
}

type instance struct {
	lab.Instance
	seed int64
	how  string
}

func (i instance) Declaration() world.Declaration { return definition{}.Declaration() }

func (i instance) Runner(plan lab.Plan) (lab.Runner, error) {
	rn, err := i.Instance.Runner(plan)
	if err != nil {
		return nil, err
	}
	return runner{Runner: rn, seed: i.seed, how: i.how}, nil
}

type runner struct {
	lab.Runner
	seed int64
	how  string
}

// Run plays the counter's seeds and crashes at the crash seed.
func (r runner) Run(ctx context.Context, lo, hi uint64, emit func(*lab.SeedResult) error) error {
	return r.Runner.Run(ctx, lo, hi, func(res *lab.SeedResult) error {
		if int64(res.Seed) == r.seed {
			switch r.how {
			case "exit":
				fmt.Fprintf(os.Stderr, "faulty: seed %d: exiting\n", res.Seed)
				os.Exit(3)
			case "error":
				return fmt.Errorf("faulty: seed %d: the runner gave up", res.Seed)
			default:
				panic(fmt.Sprintf("faulty: seed %d", res.Seed))
			}
		}
		return emit(res)
	})
}
