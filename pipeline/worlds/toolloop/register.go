package toolloop

import (
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/world"
)

func init() { lab.Register(Definition) }

// Definition is the toolloop world as the lab's registry holds it: played
// in process through fork.Lab, its checkpoints' states encoded by
// State.AppendJSON. No run takes more than max_turns steps.
var Definition lab.Definition = lab.Builtin[State]{
	Decl: declaration,
	New: func(p world.Params) (world.World[State], error) {
		w, err := New(p)
		if err != nil {
			return nil, err
		}
		return w, nil
	},
	StateJSON:       (*State).AppendJSON,
	ObservationJSON: AppendObservation,
	MaxSteps:        func(p world.Params) int { return int(p.Int("max_turns")) },
}
