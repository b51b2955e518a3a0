package server

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/forklab/forklab/stream/fence"
)

// FuzzProducerHeaders: Producer-Id, -Epoch and -Seq as any client sends
// them, present or not, against any producer state. A header set is
// refused, or read as the numbers it spells (one spelling per number:
// no sign, no leading zero, at most 2^53-1); the fence then accepts only
// the next seq of the current epoch or seq 0 of a newer one, and changes
// the state on Accept alone, as Replay folds it.
func FuzzProducerHeaders(f *testing.F) {
	f.Add(uint8(7), "w", "0", "0", false, int64(0), int64(0))
	f.Add(uint8(7), "w", "3", "12", true, int64(3), int64(11))
	f.Add(uint8(7), "w", "2", "0", true, int64(3), int64(11))
	f.Add(uint8(7), "", "01", "9007199254740992", true, int64(0), int64(0))
	f.Add(uint8(3), "w", "-1", " 1", false, int64(0), int64(0))
	f.Fuzz(func(t *testing.T, present uint8, id, epoch, seq string, known bool, stEpoch, stSeq int64) {
		h := http.Header{}
		if present&1 != 0 {
			h[hProducerID] = []string{id}
		}
		if present&2 != 0 {
			h[hProducerEpoch] = []string{epoch}
		}
		if present&4 != 0 {
			h[hProducerSeq] = []string{seq}
		}
		p, err := parseProducer(h)
		if err != nil {
			if p.present {
				t.Fatalf("refused (%v) but present", err)
			}
			return
		}
		if !p.present {
			if present&7 != 0 {
				t.Fatalf("headers %b read as no producer", present&7)
			}
			return
		}
		if present&7 != 7 || p.id != id || id == "" {
			t.Fatalf("headers %b id %q read as %+v", present&7, id, p)
		}
		if strconv.FormatInt(p.epoch, 10) != epoch || strconv.FormatInt(p.seq, 10) != seq || p.epoch > fence.MaxValue || p.seq > fence.MaxValue {
			t.Fatalf("Producer-Epoch %q Producer-Seq %q read as %d, %d", epoch, seq, p.epoch, p.seq)
		}
		s := fence.State{Known: known, Epoch: max(0, stEpoch) % (fence.MaxValue + 1), LastSeq: max(0, stSeq) % (fence.MaxValue + 1)}
		r := fence.Request{Epoch: p.epoch, Seq: p.seq}
		d := fence.Decide(s, r)
		switch d.Verdict {
		case fence.Accept:
			fresh := !s.Known || r.Epoch > s.Epoch
			if fresh && r.Seq != 0 || !fresh && (r.Epoch != s.Epoch || r.Seq != s.LastSeq+1) {
				t.Fatalf("%+v accepted %+v", s, r)
			}
			if d.Next != (fence.State{Known: true, Epoch: r.Epoch, LastSeq: r.Seq}) || fence.Replay(s, r) != d.Next {
				t.Fatalf("%+v accepting %+v: next %+v, replay %+v", s, r, d.Next, fence.Replay(s, r))
			}
		case fence.Duplicate, fence.StaleEpoch, fence.SeqGap, fence.BadEpochStart:
			if d.Next != s {
				t.Fatalf("%+v: %v of %+v changed the state to %+v", s, d.Verdict, r, d.Next)
			}
			if d.Verdict == fence.Duplicate && (!s.Known || r.Epoch != s.Epoch || r.Seq > s.LastSeq) {
				t.Fatalf("%+v: %+v is no duplicate", s, r)
			}
			if d.Verdict == fence.StaleEpoch && (!s.Known || r.Epoch >= s.Epoch) {
				t.Fatalf("%+v: %+v is not stale", s, r)
			}
		default:
			t.Fatalf("verdict %v", d.Verdict)
		}
	})
}
