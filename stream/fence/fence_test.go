package fence

import (
	"fmt"
	"testing"
)

func known(epoch, last int64) State { return State{Known: true, Epoch: epoch, LastSeq: last} }

// TestDecideTable names every branch of the protocol's validation logic
// (§5.2.1) with the exact verdict, next state and response numbers.
func TestDecideTable(t *testing.T) {
	cases := []struct {
		name string
		s    State
		r    Request
		want Decision
	}{
		{"new producer seq 0 accepted", State{}, Request{0, 0},
			Decision{Verdict: Accept, Next: known(0, 0), CurrentEpoch: 0, HighestSeq: 0}},
		{"new producer at epoch 7 seq 0 accepted", State{}, Request{7, 0},
			Decision{Verdict: Accept, Next: known(7, 0), CurrentEpoch: 7, HighestSeq: 0}},
		{"new producer seq 3 must start at 0", State{}, Request{0, 3},
			Decision{Verdict: BadEpochStart, Next: State{}, CurrentEpoch: 0, ExpectedSeq: 0}},
		{"next seq accepted", known(0, 4), Request{0, 5},
			Decision{Verdict: Accept, Next: known(0, 5), CurrentEpoch: 0, HighestSeq: 5}},
		{"repeat of last seq is duplicate", known(0, 4), Request{0, 4},
			Decision{Verdict: Duplicate, Next: known(0, 4), CurrentEpoch: 0, HighestSeq: 4}},
		{"older seq is duplicate, answers highest", known(0, 4), Request{0, 1},
			Decision{Verdict: Duplicate, Next: known(0, 4), CurrentEpoch: 0, HighestSeq: 4}},
		{"seq 0 repeat is duplicate", known(2, 0), Request{2, 0},
			Decision{Verdict: Duplicate, Next: known(2, 0), CurrentEpoch: 2, HighestSeq: 0}},
		{"gap rejected with expected seq", known(0, 4), Request{0, 6},
			Decision{Verdict: SeqGap, Next: known(0, 4), CurrentEpoch: 0, ExpectedSeq: 5, HighestSeq: 4}},
		{"far gap rejected", known(1, 0), Request{1, 1000},
			Decision{Verdict: SeqGap, Next: known(1, 0), CurrentEpoch: 1, ExpectedSeq: 1, HighestSeq: 0}},
		{"zombie: lower epoch fenced", known(2, 0), Request{1, 5},
			Decision{Verdict: StaleEpoch, Next: known(2, 0), CurrentEpoch: 2}},
		{"zombie at seq 0 fenced too", known(2, 9), Request{0, 0},
			Decision{Verdict: StaleEpoch, Next: known(2, 9), CurrentEpoch: 2}},
		{"zombie repeating an old accepted seq fenced, not duplicate", known(2, 0), Request{1, 3},
			Decision{Verdict: StaleEpoch, Next: known(2, 0), CurrentEpoch: 2}},
		{"higher epoch at seq 0 resets", known(1, 4), Request{2, 0},
			Decision{Verdict: Accept, Next: known(2, 0), CurrentEpoch: 2, HighestSeq: 0}},
		{"epoch may jump", known(1, 4), Request{9, 0},
			Decision{Verdict: Accept, Next: known(9, 0), CurrentEpoch: 9, HighestSeq: 0}},
		{"higher epoch must start at 0", known(1, 4), Request{2, 5},
			Decision{Verdict: BadEpochStart, Next: known(1, 4), CurrentEpoch: 1, ExpectedSeq: 0}},
		{"largest values accepted", known(MaxValue, MaxValue-1), Request{MaxValue, MaxValue},
			Decision{Verdict: Accept, Next: known(MaxValue, MaxValue), CurrentEpoch: MaxValue, HighestSeq: MaxValue}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.s, c.r)
			if got != c.want {
				t.Fatalf("Decide(%+v, %+v)\n got %+v\nwant %+v", c.s, c.r, got, c.want)
			}
		})
	}
}

// spec is the protocol's pseudo-code (§5.2.1) transcribed literally, with a
// never-seen producer as epoch -1: an independent statement of the rules.
func spec(s State, r Request) (Verdict, State) {
	epoch, last := int64(-1), int64(-1)
	if s.Known {
		epoch, last = s.Epoch, s.LastSeq
	}
	if r.Epoch < epoch {
		return StaleEpoch, s
	}
	if r.Epoch > epoch {
		if r.Seq != 0 {
			return BadEpochStart, s
		}
		return Accept, known(r.Epoch, 0)
	}
	if r.Seq <= last {
		return Duplicate, s
	}
	if r.Seq == last+1 {
		return Accept, known(epoch, r.Seq)
	}
	return SeqGap, s
}

// TestDecideExhaustive sweeps every state and request over a small domain
// and checks Decide against the literal pseudo-code, including the invariant
// that only Accept changes state.
func TestDecideExhaustive(t *testing.T) {
	states := []State{{}}
	for e := int64(0); e <= 4; e++ {
		for l := int64(0); l <= 5; l++ {
			states = append(states, known(e, l))
		}
	}
	n := 0
	for _, s := range states {
		for e := int64(0); e <= 5; e++ {
			for q := int64(0); q <= 7; q++ {
				r := Request{e, q}
				d := Decide(s, r)
				wv, wn := spec(s, r)
				if d.Verdict != wv || d.Next != wn {
					t.Fatalf("Decide(%+v,%+v) = %v %+v, spec says %v %+v", s, r, d.Verdict, d.Next, wv, wn)
				}
				if d.Verdict != Accept && d.Next != s {
					t.Fatalf("%v changed state: %+v -> %+v", d.Verdict, s, d.Next)
				}
				if d.Verdict == Accept && Replay(s, r) != d.Next {
					t.Fatalf("Replay(%+v,%+v) = %+v, Decide committed %+v", s, r, Replay(s, r), d.Next)
				}
				n++
			}
		}
	}
	if n != 31*6*8 {
		t.Fatalf("swept %d cases, want %d", n, 31*6*8)
	}
}

// TestZombieSequence runs the seed's sequence through the state machine:
// worker epoch 1 appends seq 0..4 and hangs; epoch 2 appends seq 0; the
// zombie wakes with seq 5 and is fenced.
func TestZombieSequence(t *testing.T) {
	var s State
	step := func(epoch, seq int64, want Verdict) {
		t.Helper()
		d := Decide(s, Request{epoch, seq})
		if d.Verdict != want {
			t.Fatalf("epoch %d seq %d: %v, want %v", epoch, seq, d.Verdict, want)
		}
		s = d.Next
	}
	for seq := int64(0); seq < 5; seq++ {
		step(1, seq, Accept)
	}
	step(2, 0, Accept)
	step(1, 5, StaleEpoch)
	step(1, 4, StaleEpoch)
	step(2, 0, Duplicate)
	step(2, 1, Accept)
	if s != known(2, 1) {
		t.Fatalf("final state %+v", s)
	}
	if got := fmt.Sprint(StaleEpoch); got != "stale-epoch" {
		t.Fatalf("String() = %q", got)
	}
}
