package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/internal/kafkadial"
	"github.com/forklab/forklab/internal/netcut"
	"github.com/forklab/forklab/stream/broker/brokertest"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/segmentio/kafka-go"
)

// brokerBehindCut starts a broker that advertises a netcut proxy in front
// of it, with the log's data topic, and returns the proxy.
func brokerBehindCut(t *testing.T) *netcut.Proxy {
	t.Helper()
	p := brokertest.StartCut(t, "").Proxy
	kc := &kafka.Client{Addr: kafka.TCP(p.Addr())}
	if _, err := kc.CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: "forklab.streams", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err)
	}
	return p
}

func rawEvents(from, n int) ([]time.Time, []string) {
	var times []time.Time
	var vals []string
	for i := from; i < from+n; i++ {
		times = append(times, time.Now())
		vals = append(vals, fmt.Sprintf(`{"i":%d}`, i))
	}
	return times, vals
}

// waitEvents waits up to 30s until the sink's files hold n events of
// stream name.
func waitEvents(t *testing.T, out, name string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if len(byStream(t, out)[genRef{name, 1}]) >= n {
			return
		}
	}
	t.Fatalf("the sink's files hold %d events of %s after 30s, want %d", len(byStream(t, out)[genRef{name, 1}]), name, n)
}

// log sink --follow across a network cut: it retries from its last commit
// with backoff (counted in the report), goes on once the network is back,
// and every event is in the files once. Cut for longer than RetryFor, it
// ends with an error saying so, soon after the limit.
func TestSinkFollowSurvivesNetworkCut(t *testing.T) {
	p := brokerBehindCut(t)
	brokers := []string{p.Addr()}
	times, vals := rawEvents(0, 4)
	produceRaw(t, brokers, "c/s", times, vals)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	type result struct {
		rep *Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := Run(runCtx, Config{Brokers: brokers, Out: out, Follow: true, RotateInterval: 200 * time.Millisecond, RetryFor: time.Minute})
		done <- result{rep, err}
	}()
	waitEvents(t, out, "c/s", 4)
	p.Cut()
	time.Sleep(3 * time.Second)
	p.Restore()
	times, vals = rawEvents(4, 4)
	produceAppends(t, brokers, "c/s", 5, times, vals)
	waitEvents(t, out, "c/s", 8)
	stop()
	r := <-done
	if r.err != nil {
		t.Fatalf("follow run: %v", r.err)
	}
	if rows := byStream(t, out)[genRef{"c/s", 1}]; len(rows) != 8 || rows[7].Event != `{"i":7}` {
		t.Fatalf("%d events after the cut, want each of the 8 once", len(rows))
	}
	if r.rep.Retries == 0 {
		t.Error("no retry counted: the cut missed the sink")
	}

	// Cut for good: the run ends after RetryFor.
	runCtx, stop = context.WithCancel(ctx)
	defer stop()
	go func() {
		rep, err := Run(runCtx, Config{Brokers: brokers, Out: out, Follow: true, RotateInterval: 200 * time.Millisecond, RetryFor: 2 * time.Second})
		done <- result{rep, err}
	}()
	time.Sleep(500 * time.Millisecond)
	p.Cut()
	start := time.Now()
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the sink did not give up within 60s of a cut for good (RetryFor 2s)")
	}
	if took := time.Since(start); took < 2*time.Second || !errors.Is(r.err, kafkadial.ErrGone) ||
		!strings.Contains(r.err.Error(), "(--retry-for sets how long to wait)") {
		t.Fatalf("after %s: %v", took, r.err)
	}
	if r.rep.Retries < 2 {
		t.Errorf("%d retries before giving up, want at least 2", r.rep.Retries)
	}
}

// produceAppends appends values to stream name (created by produceRaw),
// numbering the records from rec.
func produceAppends(t *testing.T, brokers []string, name string, rec int, times []time.Time, values []string) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "forklab.streams", RequiredAcks: kafka.RequireAll,
		Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return 0 }), BatchTimeout: time.Millisecond}
	defer w.Close()
	var msgs []kafka.Message
	for i, v := range values {
		msgs = append(msgs, kafka.Message{Key: []byte(name), Value: []byte(v), Time: times[i], Headers: []kafka.Header{
			{Key: kafkalog.HeaderOp, Value: []byte("append")}, {Key: kafkalog.HeaderStream, Value: []byte(name)},
			{Key: kafkalog.HeaderGen, Value: []byte("1")}, {Key: kafkalog.HeaderRec, Value: []byte(fmt.Sprint(rec + i))},
			{Key: kafkalog.HeaderContentType, Value: []byte(js)}}})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}
