package kafkalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// Snapshots live in a compacted topic beside the data topic (default
// "<data topic>.snapshots", one partition). A snapshot of data partition P
// is written as chunks keyed "P/SLOT/I" (SLOT a or b, I from 0), then a
// manifest keyed "P/manifest" naming the slot, the chunks' sizes and
// checksums, the format version and the data offset covered. The slots
// alternate: a snapshot being written never overwrites the one the
// manifest names, so a crash in the middle leaves the previous snapshot
// whole. Compaction keeps the last value of each key. On start a manifest
// whose chunks are missing or do not match (torn), of another version, or
// covering offsets the data topic does not hold (deleted and created again,
// truncated, or dropped by retention since) is ignored, and the partition is
// rebuilt from the data topic.

// snapshotChunk is the size of a snapshot chunk record.
const snapshotChunk = 512 << 10

// manifest is a snapshot's manifest record.
type manifest struct {
	Version   int       `json:"version"`
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Slot      string    `json:"slot"`
	Covered   int64     `json:"covered"`
	Bytes     int       `json:"bytes"`
	Chunks    []uint32  `json:"chunks"` // CRC-32 (Castagnoli) of each chunk
	Written   time.Time `json:"written"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func manifestKey(part int32) string { return fmt.Sprintf("%d/manifest", part) }
func chunkKey(part int32, slot string, i int) string {
	return fmt.Sprintf("%d/%s/%d", part, slot, i)
}

// ensureSnapshotTopic creates the snapshot topic if it is missing.
func (l *Log) ensureSnapshotTopic(ctx context.Context) error {
	t := l.cfg.SnapshotTopic
	md, err := l.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{t}})
	if err == nil {
		for _, mt := range md.Topics {
			if mt.Name == t && mt.Error == nil && len(mt.Partitions) > 0 {
				return nil
			}
		}
	}
	res, err := l.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: t, NumPartitions: 1, ReplicationFactor: l.cfg.ReplicationFactor,
		ConfigEntries: []kafka.ConfigEntry{
			{ConfigName: "cleanup.policy", ConfigValue: "compact"},
			{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(4 << 20)},
			// Small segments, so that compaction can drop old snapshots.
			{ConfigName: "segment.bytes", ConfigValue: strconv.Itoa(16 << 20)},
		},
	}}})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", t, err)
	}
	if e := res.Errors[t]; e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", t, e)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		md, err := l.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{t}})
		if err == nil {
			for _, mt := range md.Topics {
				if mt.Name == t && mt.Error == nil && len(mt.Partitions) > 0 {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s not visible after creation: %v", t, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readSnapshotTopic reads the snapshot topic to its end and returns the
// last value of every key.
func (l *Log) readSnapshotTopic(ctx context.Context) (map[string][]byte, error) {
	t := l.cfg.SnapshotTopic
	res, err := l.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		t: {kafka.FirstOffsetOf(0), kafka.LastOffsetOf(0)}}})
	if err != nil {
		return nil, err
	}
	var from, hwm int64
	for _, po := range res.Topics[t] {
		if po.Error != nil {
			return nil, po.Error
		}
		from, hwm = po.FirstOffset, po.LastOffset
	}
	last := map[string][]byte{}
	for from < hwm {
		f, err := l.client.Fetch(ctx, &kafka.FetchRequest{Topic: t, Partition: 0, Offset: from, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 10 * time.Millisecond})
		if err != nil {
			return nil, err
		}
		if f.Error != nil {
			return nil, f.Error
		}
		n := 0
		for {
			r, err := f.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			n++
			if r.Offset >= from {
				from = r.Offset + 1
			}
			k, err := protocol.ReadAll(r.Key)
			if err != nil {
				return nil, err
			}
			if r.Value == nil {
				delete(last, string(k)) // a tombstone
				continue
			}
			v, err := protocol.ReadAll(r.Value)
			if err != nil {
				return nil, err
			}
			last[string(k)] = v
		}
		if n == 0 {
			// Compaction can leave offsets without records below the
			// high watermark; an empty answer there ends the read.
			break
		}
	}
	return last, nil
}

// loadSnapshots returns the usable snapshot of every data partition that
// has one; why names, per partition, why its snapshot is not used.
func (l *Log) loadSnapshots(ctx context.Context) (snaps map[int32]*partSnapshot, why map[int32]string, err error) {
	kv, err := l.readSnapshotTopic(ctx)
	if err != nil {
		return nil, nil, err
	}
	snaps, why = map[int32]*partSnapshot{}, map[int32]string{}
	for _, p := range l.parts {
		raw, ok := kv[manifestKey(p.id)]
		if !ok {
			why[p.id] = "no snapshot"
			continue
		}
		snap, err := l.snapshotFrom(ctx, p, raw, kv)
		if err != nil {
			why[p.id] = err.Error()
			continue
		}
		snaps[p.id] = snap
	}
	return snaps, why, nil
}

// snapshotFrom assembles, checks and decodes the snapshot a manifest names.
func (l *Log) snapshotFrom(ctx context.Context, p *partition, raw []byte, kv map[string][]byte) (*partSnapshot, error) {
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("manifest is not JSON: %v", err)
	}
	if m.Version != snapshotVersion {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", errSnapshotVersion, m.Version, snapshotVersion)
	}
	if m.Topic != l.cfg.Topic || m.Partition != p.id {
		return nil, fmt.Errorf("manifest is for %s/%d", m.Topic, m.Partition)
	}
	buf := make([]byte, 0, m.Bytes)
	for i, sum := range m.Chunks {
		c, ok := kv[chunkKey(p.id, m.Slot, i)]
		if !ok {
			return nil, fmt.Errorf("torn: chunk %d of %d is missing", i, len(m.Chunks))
		}
		if crc32.Checksum(c, castagnoli) != sum {
			return nil, fmt.Errorf("torn: chunk %d does not match its checksum", i)
		}
		buf = append(buf, c...)
	}
	if len(buf) != m.Bytes {
		return nil, fmt.Errorf("torn: %d bytes, the manifest says %d", len(buf), m.Bytes)
	}
	snap, err := decodeSnapshot(buf)
	if err != nil {
		return nil, err
	}
	snap.slot = m.Slot
	if snap.Partition != p.id || snap.Covered != m.Covered {
		return nil, fmt.Errorf("snapshot is of %d at %d, the manifest says %d at %d", snap.Partition, snap.Covered, p.id, m.Covered)
	}
	// The data topic must still hold what the snapshot covers, and the
	// record it ends at.
	start, hwm, err := l.offsets(ctx, p.id)
	if err != nil {
		return nil, err
	}
	switch {
	case snap.Covered > hwm:
		return nil, fmt.Errorf("it covers offsets to %d, the partition ends at %d (topic deleted and created again?)", snap.Covered, hwm)
	case snap.Covered > 0 && snap.Covered-1 < start:
		return nil, fmt.Errorf("records after it were dropped by retention (log start %d, snapshot at %d)", start, snap.Covered)
	case snap.Covered > 0:
		recs, _, _, err := l.fetchBatch(ctx, p.id, snap.Covered-1, 1<<20)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 || recs[0].koff != snap.Covered-1 || recordSum(recs[0].key, recs[0].headers) != snap.Last {
			return nil, fmt.Errorf("the record at offset %d is not the one it ends at (topic deleted and created again?)", snap.Covered-1)
		}
	}
	return snap, nil
}

// writeSnapshot writes a captured snapshot to the snapshot topic: its
// chunks in the slot the manifest does not name, then the manifest.
func (l *Log) writeSnapshot(ctx context.Context, p *partition, snap *partSnapshot) error {
	b := snap.encode()
	l.cfg.Logf("kafkalog: snapshot of %s/%d at offset %d: writing %d bytes", l.cfg.Topic, p.id, snap.Covered, len(b))
	slot := "a"
	if p.snapshotSlot == "a" {
		slot = "b"
	}
	m := manifest{Version: snapshotVersion, Topic: l.cfg.Topic, Partition: p.id, Slot: slot, Covered: snap.Covered,
		Bytes: len(b), Written: time.Now().UTC()}
	var recs []kafka.Record
	size := 0
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		res, err := l.producer.Produce(ctx, &kafka.ProduceRequest{Topic: l.cfg.SnapshotTopic, Partition: 0,
			RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(recs...)})
		if err == nil && res.Error != nil {
			err = res.Error
		}
		recs, size = recs[:0], 0
		return err
	}
	for i := 0; i*snapshotChunk < len(b) || i == 0; i++ {
		c := b[i*snapshotChunk : min(len(b), (i+1)*snapshotChunk)]
		m.Chunks = append(m.Chunks, crc32.Checksum(c, castagnoli))
		recs = append(recs, kafka.Record{Key: kafka.NewBytes([]byte(chunkKey(p.id, slot, i))), Value: kafka.NewBytes(c)})
		if size += len(c); size >= 2<<20 {
			if err := flush(); err != nil {
				return err
			}
		}
		if testHookSnapshotChunk != nil {
			testHookSnapshotChunk()
		}
	}
	if err := flush(); err != nil {
		return err
	}
	mb, _ := json.Marshal(m)
	recs = append(recs, kafka.Record{Key: kafka.NewBytes([]byte(manifestKey(p.id))), Value: kafka.NewBytes(mb)})
	if err := flush(); err != nil {
		return err
	}
	if l.cfg.SyncSnapshot != nil {
		if err := l.cfg.SyncSnapshot(); err != nil {
			return err
		}
	}
	p.snapshotSlot = slot
	return nil
}

// testHookSnapshotChunk, when set by a test, runs after each snapshot
// chunk is queued.
var testHookSnapshotChunk func()

// snapshotDue reports whether partition p should be snapshotted now, after
// a flush: enough records since the last one, and not too soon.
func (l *Log) snapshotDue(p *partition) bool {
	every := l.cfg.SnapshotRecords
	if every < 0 || p.snapshotRunning.Load() {
		return false
	}
	return p.applied >= int64(every) && time.Since(p.lastSnapshot) >= l.cfg.SnapshotMinInterval
}

// startSnapshot captures partition p on its goroutine and writes the
// snapshot in the background.
func (l *Log) startSnapshot(p *partition) {
	snap := l.capture(p)
	p.applied, p.lastSnapshot = 0, time.Now()
	p.snapshotRunning.Store(true)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer p.snapshotRunning.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		t0 := time.Now()
		if err := l.writeSnapshot(ctx, p, snap); err != nil {
			l.cfg.Logf("kafkalog: snapshot of %s/%d at offset %d: %v", l.cfg.Topic, p.id, snap.Covered, err)
			return
		}
		l.cfg.Logf("kafkalog: snapshot of %s/%d at offset %d written (%d streams) in %s", l.cfg.Topic, p.id, snap.Covered,
			len(snap.Streams), time.Since(t0).Round(time.Millisecond))
	}()
}

// RestoreInfo says how a partition's state was made on start.
type RestoreInfo struct {
	Partition int32
	// FromSnapshot: loaded from a snapshot covering the records below
	// Covered; then Replayed records were applied. Otherwise Replayed is
	// the full rebuild and Why says why no snapshot was used.
	FromSnapshot bool
	Covered      int64
	Replayed     int
	Why          string
}

// Restored reports how each partition's state was made on start.
func (l *Log) Restored() []RestoreInfo {
	out := make([]RestoreInfo, len(l.parts))
	for i, p := range l.parts {
		out[i] = RestoreInfo{Partition: p.id, FromSnapshot: p.restored, Covered: p.covered, Replayed: p.replayed, Why: p.why}
	}
	return out
}

// finalSnapshot writes a snapshot of partition p when the log closes, if
// anything changed since the last one, so that a restart after a clean
// stop replays nothing. It runs on p's goroutine.
func (l *Log) finalSnapshot(p *partition) {
	if l.cfg.SnapshotRecords < 0 || p.applied == 0 || l.cfg.NoSnapshotOnClose {
		return
	}
	for p.snapshotRunning.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	snap := l.capture(p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.writeSnapshot(ctx, p, snap); err != nil {
		l.cfg.Logf("kafkalog: snapshot of %s/%d at offset %d on close: %v", l.cfg.Topic, p.id, snap.Covered, err)
	}
}
