package scaleout

import (
	"context"
	"fmt"
	"strings"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// A poison unit is one whose attempts failed MaxAttempts times: a world
// that panics on one of its seeds, an agent that always crashes, a unit
// whose every worker was killed. It is not tried again; it is written as
// error rows — every seed's task, checkpoints, branches and pairs with
// status error and the reason — so the sweep finishes, its error count
// says how much is missing, and the reason names each failed attempt.

// poisonReason is the error text of a poison unit's rows.
func poisonReason(u sweep.Unit, why []string) string {
	return fmt.Sprintf("unit %s failed %d attempts, the retry limit, and was not run again: %s", u.ID(), len(why), strings.Join(why, "; "))
}

// errorRunner emits every seed as an error row with one reason.
type errorRunner struct{ reason string }

// Run implements lab.Runner.
func (r errorRunner) Run(ctx context.Context, lo, hi uint64, emit func(*lab.SeedResult) error) error {
	var res lab.SeedResult
	for s := lo; s < hi; s++ {
		if s%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		res = lab.SeedResult{Seed: s, Err: r.reason}
		if err := emit(&res); err != nil {
			return err
		}
	}
	return nil
}

// writePoison writes unit u of r, of sweep sweepID, into st as error rows
// with reason.
func writePoison(ctx context.Context, r sweep.Resolved, st *sweep.Staging, sweepID string, u sweep.Unit, reason string) (sweep.UnitEntry, error) {
	uw, err := sweep.NewUnitWriter(r, st, sweep.Options{SweepID: sweepID, Runners: func(sweep.Config, lab.Plan) (lab.Runner, error) {
		return errorRunner{reason}, nil
	}})
	if err != nil {
		return sweep.UnitEntry{}, err
	}
	defer uw.Close()
	return uw.Write(ctx, u)
}
