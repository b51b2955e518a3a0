package scaleout

import (
	"errors"
	"fmt"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// errNotRunnable: the finishing step of a spread sweep runs no world.
var errNotRunnable = errors.New("the finishing step runs no world")

// declared is a world known only by the declaration its units were written
// with: what the finishing step of an external agent's sweep needs (the
// tables' layout, the configuration tables), without starting the agent.
type declared struct{ decl world.Declaration }

func (d declared) Declaration() world.Declaration { return d.decl }

func (d declared) Open(world.Params, fork.Model) (lab.Instance, error) {
	return declaredInstance(d), nil
}

type declaredInstance struct{ decl world.Declaration }

func (i declaredInstance) Declaration() world.Declaration                   { return i.decl }
func (i declaredInstance) Runner(lab.Plan) (lab.Runner, error)              { return nil, errNotRunnable }
func (i declaredInstance) MaxSteps() int                                    { return 0 }
func (i declaredInstance) Close() error                                     { return nil }
func (i declaredInstance) Start(uint64) lab.Play                            { return nil }
func (i declaredInstance) Intervention(fork.Arm, bool) (world.Action, bool) { return 0, false }
func (i declaredInstance) Checkpoint(uint64, int) (lab.ForkResult, error) {
	return lab.ForkResult{}, errNotRunnable
}
func (i declaredInstance) Branch([]byte, fork.Arm, int, func([]world.Value) bool) (lab.Outcome, error) {
	return lab.Outcome{}, errNotRunnable
}

// resolveStaged resolves the spec recorded in out's staging directory: a
// built-in world of the same declaration through the registry, any other
// (an external agent) through the recorded declaration alone.
func resolveStaged(out string) (sweep.Resolved, error) {
	spec, decl, err := sweep.StagedSpec(out)
	if err != nil {
		return sweep.Resolved{}, err
	}
	var r sweep.Resolved
	if def, lerr := lab.Lookup(spec.World); lerr == nil && sameDecl(def.Declaration(), decl) {
		r, err = spec.Resolve()
	} else {
		r, err = spec.ResolveWith(declared{decl})
	}
	if err != nil {
		return r, fmt.Errorf("the staged spec: %w", err)
	}
	return r, nil
}

func sameDecl(a, b world.Declaration) bool {
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}
