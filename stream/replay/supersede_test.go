package replay_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/client"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/service"
)

// An append to generation 1 that the service gave up on lands after
// generation 1 was deleted and generation 2 created; retention then
// removes everything up to generation 2's create. The recipes, like the
// service's rebuild, used to adopt generation 1 from that late record and
// pass over generation 2's records (another generation). Rule 7: a record
// of a newer generation ends the current one. Both recipes must print
// what the rebuilt service reads (kafkalog's
// TestLateRecordOfOlderGenerationAfterRetention checks the service and
// kafkalog.Replay).
func TestReplayRecipesNewerGeneration(t *testing.T) {
	useKcat, useJS := kcatReady(t), kafkajsReady(t)
	if !useKcat && !useJS {
		t.Skip("neither kcat nor node is available")
	}
	dir := t.TempDir()
	ctx := context.Background()
	startSvc := func() *service.Service {
		svc, err := service.Start(ctx, service.Config{
			Addr: "127.0.0.1:0", DataDir: dir, NoSync: true,
			Log: kafkalog.Config{Partitions: 1, SnapshotRecords: -1, Logf: func(string, ...any) {}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	svc := startSvc()
	w := &writer{t: t, svc: svc, c: client.New(svc.URL), answers: map[string][]string{}}
	const name = "sup/x"
	w.create(name, textPlain, "")                                                   // 0
	land := w.hold(func() int { return w.post(name, producer("p", 0, 0), "old;") }) // given up on
	if err := w.c.Delete(ctx, name); err != nil {                                   // 1, decided after the re-read
		t.Fatal(err)
	}
	w.create(name, textPlain, "") // 2: generation 2
	rd := kafkalog.NewReader(svc.Brokers, svc.Log.Topic())
	defer rd.Close()
	_, hwm, err := rd.Offsets(ctx, 0)
	if err != nil || hwm != 3 {
		t.Fatalf("partition 0 ends at %d (%v), want 3", hwm, err)
	}
	land() // 3: the append to generation 1
	for i, body := range []string{"new1;", "new2;"} {
		if st := w.settle(func() int { return w.post(name, producer("q", 0, int64(i)), body) }); st != http.StatusOK && st != http.StatusNoContent {
			t.Fatalf("append %s: %d", body, st)
		}
	}
	if err := svc.Broker.Cluster().DeleteRecords(svc.Log.Topic(), 0, hwm); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	svc.Close(cctx)
	svc = startSvc()
	defer svc.Close(ctx)
	c := client.New(svc.URL)
	_, err = c.Read(ctx, name, client.Start)
	from := client.EarliestOffset(err)
	if client.GoneReason(err) != client.GoneRetention || from == "" {
		t.Fatalf("rebuilt service, %s from the beginning: %v, want 410 (retention) naming the earliest offset", name, err)
	}
	st := stream{name: name}
	want := apiRead(t, c, st, from)
	if string(want) != "new1;new2;" {
		t.Fatalf("rebuilt service reads %q from %s, want generation 2's new1;new2;", want, from)
	}
	for _, f := range []string{client.Start, from} {
		if useKcat {
			got, err := kcatReplay(svc, 0, name, f)
			if err != nil {
				t.Fatalf("kcat recipe from %s: %v", f, err)
			}
			same(t, "kcat recipe", st, f, got, want)
		}
		if useJS {
			got, err := jsReplay(svc, 0, name, f)
			if err != nil {
				t.Fatalf("kafkajs recipe from %s: %v", f, err)
			}
			same(t, "kafkajs recipe", st, f, got, want)
		}
	}
}
