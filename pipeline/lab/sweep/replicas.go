package sweep

import (
	"fmt"

	"github.com/forklab/forklab/pipeline/world"
)

// ReplicasWarning is the warning for a sweep of a world that declares
// itself nondeterministic with one replica per arm: each side of a pair is
// then one draw, and the agent's noise is counted as rescues and harms
// (docs/agent-protocol.md, "Determinism, checkpoints and noise"). With an
// even number of replicas a tie can happen, and a side succeeds only by a
// strict majority (docs/worlds.md), so every tie counts as a failure of
// that arm. "" when there is nothing to say. forklab sweep prints it on stderr
// and forklab report (text, --brief, HTML) under its header, from the
// manifest's declaration and spec.
func ReplicasWarning(d world.Declaration, replicas int) string {
	switch {
	case !d.Nondeterministic:
		return ""
	case replicas == 1:
		return fmt.Sprintf("world %s declares itself nondeterministic, but --replicas 1 labels each pair from one branch per arm, so its noise counts as rescues and harms: sweep with --replicas 5 (or more, odd) and the aa arm (--arms off,on,aa) to see the noise floor", d.Name)
	case replicas%2 == 0:
		return fmt.Sprintf("world %s declares itself nondeterministic, and --replicas %d is even: a side succeeds by a strict majority, so a tie (%d of %d) counts as a failure of its arm: sweep with an odd number of replicas (%d)", d.Name, replicas, replicas/2, replicas, replicas+1)
	}
	return ""
}
