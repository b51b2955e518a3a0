package sink

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/segmentio/kafka-go"
)

// syntheticRecords are n appends of session events to 16 streams, as
// records of partition 0 read from Kafka (the creates first).
func syntheticRecords(n int) []kafkalog.Record {
	var out []kafkalog.Record
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	rec := map[string]int{}
	add := func(op, name string, value []byte) {
		h := []kafka.Header{{Key: kafkalog.HeaderOp, Value: []byte(op)}, {Key: kafkalog.HeaderStream, Value: []byte(name)},
			{Key: kafkalog.HeaderGen, Value: []byte("1")}, {Key: kafkalog.HeaderRec, Value: []byte(strconv.Itoa(rec[name]))},
			{Key: kafkalog.HeaderContentType, Value: []byte(js)},
			{Key: kafkalog.HeaderProducerID, Value: []byte("p")}, {Key: kafkalog.HeaderProducerEpoch, Value: []byte("0")},
			{Key: kafkalog.HeaderProducerSeq, Value: []byte(strconv.Itoa(rec[name]))}}
		rec[name]++
		r, ok, err := kafkalog.DecodeRecord(0, int64(len(out)), []byte(name), value, h, now.Add(time.Duration(len(out))*time.Millisecond))
		if !ok || err != nil {
			panic(err)
		}
		out = append(out, r)
	}
	for p := range 16 {
		add("create", fmt.Sprintf("bench/p%02d", p), nil)
	}
	for i := range n {
		add("append", fmt.Sprintf("bench/p%02d", i%16), []byte(fmt.Sprintf(sessionEvents[i%len(sessionEvents)], i/32+1)))
	}
	return out
}

// BenchmarkApplyAndRotate is the sink's own work per event, without Kafka:
// fold the record, flatten its event into a row, and write the batch
// (Parquet, fsync, rename, state) every 10,000 events.
func BenchmarkApplyAndRotate(b *testing.B) {
	recs := syntheticRecords(b.N)
	cfg := Config{Out: b.TempDir(), RotateRecords: 10000}
	cfg.defaults()
	w := &worker{cfg: &cfg, part: 0, root: cfg.Out + "/" + Dir, rep: &Report{}, mu: &sync.Mutex{}}
	w.cache = newValueCache(cfg.CacheBytes)
	w.warned = map[string]bool{}
	st, rp, folds, err := loadState(w.root, cfg.Topic, 0, "")
	if err != nil {
		b.Fatal(err)
	}
	w.st, w.replay, w.folds, w.redoEnd = st, rp, folds, -1
	b.ResetTimer()
	for _, r := range recs {
		if err := w.apply(nil, r); err != nil {
			b.Fatal(err)
		}
		w.advance(r.Offset + 1)
		if len(w.rows) >= cfg.RotateRecords {
			if err := w.rotate(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.rotate(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
