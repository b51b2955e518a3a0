package agentproc

import (
	"context"
	"fmt"
	"math"

	"github.com/forklab/forklab/pipeline/world"
)

// A sweep's cost budget (forklab sweep --max-cost, the spec's max_cost)
// is enforced where the work is handed out: before a runner sends a block
// of seeds to the agent, it asks the definition how many seeds the budget
// has room for. The cost counted is what the sweep has cost so far: every
// seed in the journal (read when SetJournal is called: the seeds an
// interrupted run finished, whether their units were kept or are to be
// replayed), and what the agent reported for the seeds played in this
// process, failed ones included. Without a journal, the units kept from an
// interrupted run (AddKept) and the seeds replayed count instead.
//
// Seeds are let through while that total is below every limit, and only
// as many as fit in what is left once the seeds in flight are paid for,
// each costing as much as the dearest seed seen so far; the first seed,
// whose cost nobody knows yet, goes alone, and so does a seed the
// estimate has no room for when nothing else is in flight. So the sweep
// stops having spent at most one seed's cost beyond the limit, as long as
// no seed costs more than the dearest one before it; with room for many,
// the blocks are full and as many run at once as the pool has processes.

// SetBudget makes the definition stop once the cost counted reaches any
// of limit's totals, by cost field (world.CostSteps, CostTokens, CostUSD,
// CostSeconds); nil or empty means no budget. Call it before the runners
// start.
func (d *Definition) SetBudget(limit map[string]float64) {
	d.mu.Lock()
	d.limit = limit
	d.mu.Unlock()
}

// AddKept counts c, the recorded cost of work done before this process
// (units kept from an interrupted sweep), against the budget.
func (d *Definition) AddKept(c world.Cost) {
	d.mu.Lock()
	d.kept = d.kept.Add(c)
	d.mu.Unlock()
	d.wakeAll()
}

// Reached says which limit of the budget stopped the definition, e.g.
// "steps reached 62 of the budget steps=50"; "" while none has.
func (d *Definition) Reached() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reached
}

// Counted returns the cost the budget counts so far (see above).
func (d *Definition) Counted() world.Cost {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counted()
}

// counted is the cost the budget counts; d.mu is held.
func (d *Definition) counted() world.Cost {
	if d.journal != "" {
		return d.journaled.Add(d.spent)
	}
	return d.kept.Add(d.spent).Add(d.replayed)
}

// admit waits until seeds may be sent to the agent and returns how many,
// at most want, counted in flight until release; 0 when the definition is
// stopped (Stop, or the budget reached) or ctx ends.
func (d *Definition) admit(ctx context.Context, want uint64) uint64 {
	for {
		d.mu.Lock()
		if d.stopped.Load() {
			d.mu.Unlock()
			return 0
		}
		n := want
		if len(d.limit) > 0 {
			total := d.counted()
			if why := over(total, d.limit); why != "" {
				d.reached = why
				d.stopped.Store(true)
				d.mu.Unlock()
				d.wakeAll()
				return 0
			}
			n = min(want, room(total, d.dearest, d.inflight, d.limit))
			if n == 0 && d.inflight == 0 {
				n = 1 // nothing in flight: one seed, at most its cost over
			}
			if n == 0 {
				wake := d.wakeCh()
				d.mu.Unlock()
				select {
				case <-wake:
					continue
				case <-ctx.Done():
					return 0
				}
			}
		}
		d.inflight += n
		d.mu.Unlock()
		return n
	}
}

// room is how many more seeds, each costing dearest, fit within limit
// once total is spent and inflight seeds more are paid for; 0 while no
// seed's cost is known (dearest is zero in every limited field).
func room(total, dearest world.Cost, inflight uint64, limit map[string]float64) uint64 {
	n := uint64(math.MaxUint64)
	known := false
	for f, max := range limit {
		per := dearest.Field(f)
		if per <= 0 {
			continue
		}
		known = true
		left := max - total.Field(f) - per*float64(inflight)
		if left < per {
			return 0
		}
		n = min(n, uint64(left/per))
	}
	if !known {
		return 0
	}
	return n
}

// release ends n seeds admit let through, the dearest of which cost
// dearest.
func (d *Definition) release(n uint64, dearest world.Cost) {
	d.mu.Lock()
	d.inflight -= n
	d.dearest = d.dearest.Max(dearest)
	d.mu.Unlock()
	d.wakeAll()
}

// wakeCh returns the channel closed at the next change the waiting
// dispatchers care about; d.mu is held.
func (d *Definition) wakeCh() chan struct{} {
	if d.wake == nil {
		d.wake = make(chan struct{})
	}
	return d.wake
}

// wakeAll wakes the dispatchers waiting in admit.
func (d *Definition) wakeAll() {
	d.mu.Lock()
	if d.wake != nil {
		close(d.wake)
		d.wake = nil
	}
	d.mu.Unlock()
}

// over names the first limit (in CostFields order) c has reached, or "".
func over(c world.Cost, limit map[string]float64) string {
	for _, f := range world.CostFields {
		max, ok := limit[f]
		if !ok {
			continue
		}
		if v := c.Field(f); v >= max {
			return fmt.Sprintf("%s reached %.6g of the budget %s=%g", f, v, f, max)
		}
	}
	return ""
}
