// Package fork is the fork lab's core: run a task to a fork step, take a
// checkpoint, fork it into arms, finish every branch, and label each pair of
// control and treatment outcomes.
//
// The vocabulary is the uplift-modelling one. The control arm is Off
// (continue as is); a treatment arm applies its intervention at the fork and
// continues. A pair is rescued (the treatment succeeds where the control
// fails: a persuadable), harmed (the reverse: a sleeping dog) or unchanged,
// which splits into sure things (both succeed) and lost causes (both fail).
// Net is rescued minus harmed.
//
// A fork in memory copies the state value; a fork from a file decodes the
// checkpoint's JSON. Both must give the same branches, and the tests check
// that they do, seed by seed, across processes.
package fork

import (
	"fmt"
	"strings"

	"github.com/forklab/forklab/pipeline/world"
)

// Arm names one branch of a fork.
type Arm string

// The arms. Off is the control every other arm is compared with.
const (
	// Off continues the run as it is (control).
	Off Arm = "off"
	// On applies the recovery (refresh), then continues: the seed's arm.
	On Arm = "on"
	// Placebo burns an action that returns nothing new, then continues:
	// it separates the cost of interrupting the run from the value of new
	// information (the seed's "content-free variant").
	Placebo Arm = "placebo"
	// AA is an A/A fork: Off again, with independent model noise. Its flip
	// rate is the noise floor any rescue count has to beat.
	AA Arm = "aa"
	// Policy applies the recovery only where a guard rule fires on the
	// checkpoint's features.
	Policy Arm = "policy"
)

// Arms lists every arm in canonical order.
var Arms = []Arm{Off, On, Placebo, AA, Policy}

// code is the arm's identifier inside noise keys; it must never change, or
// noisy sweeps stop reproducing.
func (a Arm) code() uint64 {
	switch a {
	case Off:
		return 1
	case On:
		return 2
	case Placebo:
		return 3
	case AA:
		return 4
	case Policy:
		return 5
	}
	return 0
}

// ParseArms parses a comma-separated arm list such as "off,on,placebo".
// It fails on unknown or repeated names and on a list without off, the
// control.
func ParseArms(s string) ([]Arm, error) {
	var arms []Arm
	seen := map[Arm]bool{}
	for _, f := range strings.Split(s, ",") {
		a := Arm(strings.TrimSpace(f))
		if a.code() == 0 {
			return nil, fmt.Errorf("unknown arm %q (known: off, on, placebo, aa, policy)", a)
		}
		if seen[a] {
			return nil, fmt.Errorf("arm %q listed twice", a)
		}
		seen[a] = true
		arms = append(arms, a)
	}
	if !seen[Off] {
		return nil, fmt.Errorf("arm list %q has no control: include off", s)
	}
	if len(arms) < 2 {
		return nil, fmt.Errorf("arm list %q has no treatment arm to compare with off", s)
	}
	return arms, nil
}

// Label is the outcome of a pair.
type Label string

// The labels.
const (
	Rescued   Label = "rescued"
	Harmed    Label = "harmed"
	Unchanged Label = "unchanged"
)

// Quadrant is the four-way split of a pair by both outcomes.
type Quadrant string

// The quadrants, in uplift-modelling terms.
const (
	Persuadable Quadrant = "persuadable"  // rescued: treatment succeeds, control fails
	SleepingDog Quadrant = "sleeping_dog" // harmed: control succeeds, treatment fails
	SureThing   Quadrant = "sure_thing"   // unchanged, both succeed
	LostCause   Quadrant = "lost_cause"   // unchanged, both fail
)

// Classify labels a pair from the control's and the treatment's success.
func Classify(control, treatment bool) (Label, Quadrant) {
	switch {
	case treatment && !control:
		return Rescued, Persuadable
	case control && !treatment:
		return Harmed, SleepingDog
	case control:
		return Unchanged, SureThing
	default:
		return Unchanged, LostCause
	}
}

// Majority reports whether successes out of k replicas is a strict majority.
// With an even k a tie counts as failure; use an odd k to avoid ties.
func Majority(successes, k int) bool { return 2*successes > k }

// Model is the scripted fake model's sampling noise. With Temperature 0 it
// is the greedy script, as in the seed. Above 0, each turn departs from the
// greedy choice with probability Temperature (a stand-in for sampling
// temperature, not a softmax one); a departing turn is, with probability
// NoTool, a turn without a tool call, and otherwise another tool chosen
// uniformly.
type Model struct {
	Temperature float64 `json:"temperature"`
	NoTool      float64 `json:"no_tool"`
}

// Validate reports a probability out of [0, 1].
func (m Model) Validate() error {
	if !(m.Temperature >= 0 && m.Temperature <= 1) {
		return fmt.Errorf("temperature must be in [0, 1], got %v", m.Temperature)
	}
	if !(m.NoTool >= 0 && m.NoTool <= 1) {
		return fmt.Errorf("no_tool must be in [0, 1], got %v", m.NoTool)
	}
	return nil
}

// Choose returns the model's action for one turn: greedy is the script's
// choice, tools the actions the model may call, key the noise stream and
// turn the turn's index within the run (its step number).
func (m Model) Choose(greedy world.Action, tools []world.Action, key uint64, turn int) world.Action {
	if m.Temperature == 0 || world.Draw(key, world.PurposeModel, turn) >= m.Temperature {
		return greedy
	}
	u := world.Draw(key, world.PurposeModelNoTool, turn)
	if u < m.NoTool || len(tools) < 2 {
		return world.NoTool
	}
	// Reuse the rest of u's range to pick among the other tools.
	v := (u - m.NoTool) / (1 - m.NoTool)
	i := min(int(v*float64(len(tools)-1)), len(tools)-2)
	for _, t := range tools {
		if t == greedy {
			continue
		}
		if i == 0 {
			return t
		}
		i--
	}
	return world.NoTool
}

// Turn is one entry of a checkpoint's history: the step count after the
// turn and the action's name.
type Turn struct {
	Step   int    `json:"step"`
	Action string `json:"action"`
}

// Key returns the noise stream of one branch: the task seed, fork step, arm
// and replica (issue: "noise is seeded per (seed, fork step, arm, replica)").
func Key(seed uint64, forkStep int, arm Arm, replica int) uint64 {
	return world.Key(seed, uint64(forkStep), arm.code(), uint64(replica))
}

// BranchKey is the noise stream of a branch of arm with its guard rule's
// verdict fires: Key of the arm, except that the policy arm plays with on's
// stream where its rule fires and with off's where it does not, replica for
// replica. So a policy branch is exactly the on branch or exactly the off
// branch of its checkpoint, also with a noisy model: a policy pair whose
// rule did not fire is unchanged by construction, and a policy rerun
// differs from always-on only where the rule holds back the recovery.
func BranchKey(seed uint64, forkStep int, arm Arm, replica int, fires bool) uint64 {
	if arm == Policy {
		arm = Off
		if fires {
			arm = On
		}
	}
	return Key(seed, forkStep, arm, replica)
}

// PrefixKey is the noise stream of the run before any fork, shared by all
// fork steps of a seed so that the checkpoint at step 2 is a prefix of the
// run to step 3.
func PrefixKey(seed uint64) uint64 { return world.Key(seed, 0) }
