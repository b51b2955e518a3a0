package kafkalog

import (
	"maps"
	"testing"

	"github.com/forklab/forklab/stream/fence"
)

// TestTxRollback checks that a failed batch puts every stream's write state
// back as it was before the batch, the producer entries appends changed in
// place included, and keeps the record numbers it took burnt.
func TestTxRollback(t *testing.T) {
	type step struct {
		stream int    // index into the batch's streams
		op     string // "append" (touchFields+touchProducer) or "delete" (touch)
		id     string // producer of an append; "" for none
		seq    int64
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"new producer", []step{{0, "append", "p1", 0}}},
		{"known producer twice", []step{{0, "append", "p0", 5}, {0, "append", "p0", 6}}},
		{"append without producer", []step{{0, "append", "", 0}}},
		{"append then delete", []step{{0, "append", "p0", 5}, {0, "append", "p2", 0}, {0, "delete", "", 0}}},
		{"delete then append", []step{{0, "delete", "", 0}, {0, "append", "p0", 5}}},
		{"two streams", []step{{0, "append", "p0", 5}, {1, "append", "p0", 0}, {1, "append", "p0", 1}, {0, "append", "p1", 0}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			streams := []*stream{newStream(meta{name: "a"}), newStream(meta{name: "b"})}
			streams[0].w.nextRec, streams[0].w.burnt = 7, 7
			streams[0].w.producers["p0"] = fence.State{Known: true, Epoch: 0, LastSeq: 4}
			before := make([]wstate, len(streams))
			for i, s := range streams {
				before[i] = s.w.clone()
			}
			tx := newTx()
			tx.reset()
			for _, st := range c.steps {
				s := streams[st.stream]
				switch st.op {
				case "append":
					tx.touchFields(s)
					if st.id != "" {
						tx.touchProducer(s, st.id)
					}
					r := &record{op: opAppend, rec: s.w.allocRec(), hasProducer: st.id != "", producerID: st.id, seq: st.seq, streamSeq: "x"}
					s.w.apply(r)
				case "delete":
					tx.touch(s)
					s.w.nextRec = s.w.allocRec() + 1
					s.w.deleted = true
					delete(s.w.producers, "p0") // a change to the map itself
				}
			}
			burnt := make([]int64, len(streams))
			for i, s := range streams {
				burnt[i] = s.w.burnt
			}
			tx.rollback()
			for i, s := range streams {
				want := before[i]
				want.burnt = max(before[i].burnt, burnt[i])
				got := s.w
				if got.nextRec != want.nextRec || got.burnt != want.burnt || got.streamSeq != want.streamSeq ||
					got.closed != want.closed || got.deleted != want.deleted || !maps.Equal(got.producers, want.producers) {
					t.Errorf("stream %d after rollback: %+v, want %+v", i, got, want)
				}
			}
		})
	}
}
