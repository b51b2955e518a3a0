package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/forklab/forklab/internal/dirlock"
)

// A second broker on the same data directory is refused: both would number
// records from the same offsets.
func TestDataDirIsExclusive(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(Config{DataDir: dir, NoSync: true})
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), "stop the other forklab log serve") {
		t.Fatalf("second broker: %v", err)
	}
	b.Close()
	b2, err := Start(Config{DataDir: dir, NoSync: true})
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	b2.Close()
}

// TestSyncPartition produces to a topic whose segments roll every few
// kilobytes and checks, after each SyncPartition, that every segment file
// of the partition was synced up to its current size (the bookkeeping that
// decides what to sync), that a partition without segment files is an
// error (kfake's layout changed: appends must not go unsynced), and that
// NoSync and KfakeSync make it a no-op.
func TestSyncPartition(t *testing.T) {
	b, err := Start(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	cl := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 10 * time.Second}
	if _, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: "t", NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "segment.bytes", ConfigValue: "4096"}}}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	val := make([]byte, 1000)
	for i := 0; i < 40; i++ {
		res, err := cl.Produce(ctx, &kafka.ProduceRequest{Topic: "t", Partition: 1, RequiredAcks: kafka.RequireAll,
			Records: kafka.NewRecordReader(kafka.Record{Value: kafka.NewBytes(val)})})
		if err != nil || res.Error != nil {
			t.Fatal(err, res)
		}
		if err := b.SyncPartition("t", 1); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		dir := filepath.Join(b.dir, "partitions", "t-1")
		ents, _ := os.ReadDir(dir)
		s := b.parts[dir]
		dats := 0
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".dat") {
				continue
			}
			dats++
			info, _ := e.Info()
			if seg := s.files[e.Name()]; seg == nil || seg.synced != info.Size() {
				t.Fatalf("produce %d: segment %s has %d bytes, synced %v", i, e.Name(), info.Size(), seg)
			}
		}
		if i == 39 && dats < 5 {
			t.Fatalf("%d segment files after 40 KB with 4 KB segments: the test did not roll segments", dats)
		}
	}
	if err := b.SyncPartition("t", 0); err == nil || !strings.Contains(err.Error(), "no segment files") {
		t.Fatalf("sync of a partition without segments: %v", err)
	}
	for _, cfg := range []Config{{NoSync: true}, {KfakeSync: true}} {
		cfg.DataDir = t.TempDir()
		b2, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := b2.SyncPartition("t", 0); err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		b2.Close()
	}
}
