package kafkalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// Snapshots live in a compacted topic beside the data topic (default
// "<data topic>.snapshots") with two partitions: partition 1 holds the
// snapshots' chunks, partition 0 one manifest per data partition (key
// "P"), written after the chunks it names. A manifest names a chain: the
// full snapshot it starts from and the deltas after it, each with its
// format version, the data offset it covers, its size, the CRC-32C of each
// chunk and the offsets of its chunks in partition 1, so a start reads the
// small manifest partition and then exactly the chunks it needs, however
// long the topic's history. Chunk keys ("P/full/SLOT/I", "P/delta/SLOT/N/I")
// alternate between two slots, so compaction keeps the last two chains and a
// snapshot being written never overwrites the one the manifest names: a
// crash in the middle leaves the previous snapshot whole.
//
// On start a chain is ignored, and the partition rebuilt from the data
// topic, when its manifest is missing or not readable, of another version,
// or its full snapshot is torn (a chunk missing or not matching) or does
// not fit the data topic (it covers more than the partition holds, its last
// record is not the one at that offset, retention dropped records after
// it); a torn delta ends the chain where it is (the records after the last
// good one are replayed).

// snapshotChunk is the size of a snapshot chunk record.
const snapshotChunk = 512 << 10

// Partitions of the snapshot topic.
const (
	manifestPartition = 0
	chunkPartition    = 1
)

// manifest is a chain's manifest record.
type manifest struct {
	Version   int       `json:"version"`
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Slot      string    `json:"slot"` // a or b: the chain's chunk keys
	Full      piece     `json:"full"`
	Deltas    []piece   `json:"deltas,omitempty"`
	Written   time.Time `json:"written"`
}

// piece is one snapshot of a chain: where its chunks are and how to check
// them.
type piece struct {
	Covered int64    `json:"covered"`
	Bytes   int      `json:"bytes"`
	Chunks  []uint32 `json:"chunks"` // CRC-32 (Castagnoli) of each chunk
	First   int64    `json:"first"`  // offset in partition 1 of its first chunk
	Last    int64    `json:"last"`   // and of its last
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func manifestKey(part int32) string { return strconv.Itoa(int(part)) }

// chunkKey is the key of chunk i of a chain's full snapshot (delta -1) or
// of its delta number delta.
func chunkKey(part int32, slot string, delta, i int) string {
	if delta < 0 {
		return fmt.Sprintf("%d/full/%s/%d", part, slot, i)
	}
	return fmt.Sprintf("%d/delta/%s/%d/%d", part, slot, delta, i)
}

// ensureSnapshotTopic creates the snapshot topic if it is missing.
func (l *Log) ensureSnapshotTopic(ctx context.Context) error {
	t := l.cfg.SnapshotTopic
	parts := func() int {
		md, err := l.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{t}})
		if err != nil {
			return -1
		}
		for _, mt := range md.Topics {
			if mt.Name == t && mt.Error == nil {
				return len(mt.Partitions)
			}
		}
		return 0
	}
	switch n := parts(); {
	case n >= 2:
		return nil
	case n == 1:
		return fmt.Errorf("snapshot topic %s has 1 partition, this version needs 2: delete it (the next start rebuilds from %s and writes it anew)", t, l.cfg.Topic)
	}
	res, err := l.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: t, NumPartitions: 2, ReplicationFactor: l.cfg.ReplicationFactor,
		ConfigEntries: []kafka.ConfigEntry{
			{ConfigName: "cleanup.policy", ConfigValue: "compact"},
			{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(4 << 20)},
			// Small segments, so that compaction can drop old chains.
			{ConfigName: "segment.bytes", ConfigValue: strconv.Itoa(64 << 20)},
		},
	}}})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", t, err)
	}
	if e := res.Errors[t]; e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", t, e)
	}
	deadline := time.Now().Add(10 * time.Second)
	for parts() < 2 {
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s not visible after creation", t)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// readManifests reads the manifest partition to its end and returns the
// last manifest record of every data partition.
func (l *Log) readManifests(ctx context.Context) (map[string][]byte, error) {
	last := map[string][]byte{}
	err := l.readSnapshotRange(ctx, manifestPartition, -1, -1, func(k string, v []byte, _ int64) {
		if v == nil {
			delete(last, k)
		} else {
			last[k] = v
		}
	})
	return last, err
}

// readSnapshotRange calls fn for the records of a snapshot topic partition
// from offset first to last (-1, -1: all of it); a nil value is a
// tombstone. With a record key, a record without a valid MAC (not the
// log's: recordkey.go) is skipped: a snapshot is state the log trusts.
func (l *Log) readSnapshotRange(ctx context.Context, part int, first, last int64, fn func(key string, value []byte, offset int64)) error {
	t := l.cfg.SnapshotTopic
	mac := l.key.newMacer(t, int32(part))
	res, err := l.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		t: {kafka.FirstOffsetOf(part), kafka.LastOffsetOf(part)}}})
	if err != nil {
		return err
	}
	var start, hwm int64
	for _, po := range res.Topics[t] {
		if po.Partition != part {
			continue
		}
		if po.Error != nil {
			return po.Error
		}
		start, hwm = po.FirstOffset, po.LastOffset
	}
	from := max(first, start)
	end := hwm
	if last >= 0 {
		end = min(hwm, last+1)
	}
	for from < end {
		f, err := l.client.Fetch(ctx, &kafka.FetchRequest{Topic: t, Partition: part, Offset: from, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 10 * time.Millisecond})
		if err != nil {
			return err
		}
		if f.Error != nil {
			return f.Error
		}
		n := 0
		for {
			r, err := f.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			n++
			if r.Offset < from {
				continue
			}
			from = r.Offset + 1
			if r.Offset >= end {
				break
			}
			k, err := protocol.ReadAll(r.Key)
			if err != nil {
				return err
			}
			var v []byte
			if r.Value != nil {
				if v, err = protocol.ReadAll(r.Value); err != nil {
					return err
				}
			}
			if !mac.valid(k, v, r.Headers) {
				continue
			}
			fn(string(k), v, r.Offset)
		}
		if n == 0 {
			// Compaction can leave offsets without records below the
			// high watermark; an empty answer there ends the read.
			break
		}
	}
	return nil
}

// loadSnapshots returns the usable snapshot of every data partition that
// has one (its chain merged into one full snapshot); why names, per
// partition, why its snapshot is not used, or what of its chain is not.
func (l *Log) loadSnapshots(ctx context.Context) (snaps map[int32]*partSnapshot, why map[int32]string, err error) {
	ms, err := l.readManifests(ctx)
	if err != nil {
		return nil, nil, err
	}
	snaps, why = map[int32]*partSnapshot{}, map[int32]string{}
	for _, p := range l.parts {
		raw, ok := ms[manifestKey(p.id)]
		if !ok {
			why[p.id] = "no snapshot"
			continue
		}
		snap, note, err := l.snapshotFrom(ctx, p, raw)
		if err != nil {
			why[p.id] = err.Error()
			continue
		}
		why[p.id] = note
		snaps[p.id] = snap
	}
	return snaps, why, nil
}

// snapshotFrom assembles, checks and decodes the chain a manifest names.
// note says which deltas were left out, if any.
func (l *Log) snapshotFrom(ctx context.Context, p *partition, raw []byte) (snap *partSnapshot, note string, err error) {
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, "", fmt.Errorf("manifest is not JSON: %v", err)
	}
	if m.Version != snapshotVersion {
		return nil, "", fmt.Errorf("%w: version %d, this build reads %d", errSnapshotVersion, m.Version, snapshotVersion)
	}
	if m.Topic != l.cfg.Topic || m.Partition != p.id {
		return nil, "", fmt.Errorf("manifest is for %s/%d", m.Topic, m.Partition)
	}
	// Every chunk the chain names, in one read of partition 1.
	first, last := m.Full.First, m.Full.Last
	for _, d := range m.Deltas {
		first, last = min(first, d.First), max(last, d.Last)
	}
	chunks := map[string][]byte{}
	prefix := manifestKey(p.id) + "/"
	err = l.readSnapshotRange(ctx, chunkPartition, first, last, func(k string, v []byte, _ int64) {
		if strings.HasPrefix(k, prefix) {
			chunks[k] = v
		}
	})
	if err != nil {
		return nil, "", err
	}
	assemble := func(pc piece, delta int) ([]byte, error) {
		buf := make([]byte, 0, pc.Bytes)
		for i, sum := range pc.Chunks {
			c, ok := chunks[chunkKey(p.id, m.Slot, delta, i)]
			if !ok {
				return nil, fmt.Errorf("torn: chunk %d of %d is missing", i, len(pc.Chunks))
			}
			if crc32.Checksum(c, castagnoli) != sum {
				return nil, fmt.Errorf("torn: chunk %d does not match its checksum", i)
			}
			buf = append(buf, c...)
		}
		if len(buf) != pc.Bytes {
			return nil, fmt.Errorf("torn: %d bytes, the manifest says %d", len(buf), pc.Bytes)
		}
		return buf, nil
	}
	b, err := assemble(m.Full, -1)
	if err != nil {
		return nil, "", err
	}
	if snap, err = decodeSnapshot(b); err != nil {
		return nil, "", err
	}
	if snap.Delta || snap.Partition != p.id || snap.Covered != m.Full.Covered {
		return nil, "", fmt.Errorf("snapshot is of %d at %d, the manifest says %d at %d", snap.Partition, snap.Covered, p.id, m.Full.Covered)
	}
	snap.chain = &m
	for i, d := range m.Deltas {
		b, err := assemble(d, i)
		var ds *partSnapshot
		if err == nil {
			ds, err = decodeSnapshot(b)
		}
		if err == nil && (!ds.Delta || ds.Covered != d.Covered) {
			err = fmt.Errorf("delta is of %d at %d, the manifest says %d at %d", ds.Partition, ds.Covered, p.id, d.Covered)
		}
		if err == nil {
			_, err = merge(snap, ds)
		}
		if err != nil {
			// The chain ends at the last good one: the records after it
			// are replayed. (merge changes snap only once it succeeds.)
			note = fmt.Sprintf("deltas from %d of %d not used (%v)", i+1, len(m.Deltas), err)
			break
		}
	}
	// The data topic must still hold what the snapshot covers, and the
	// record it ends at.
	start, hwm, err := l.offsets(ctx, p.id)
	if err != nil {
		return nil, "", err
	}
	switch {
	case snap.Covered > hwm:
		return nil, "", fmt.Errorf("it covers offsets to %d, the partition ends at %d (topic deleted and created again?)", snap.Covered, hwm)
	case snap.Covered > 0 && snap.Covered-1 < start:
		return nil, "", fmt.Errorf("records after it were dropped by retention (log start %d, snapshot at %d)", start, snap.Covered)
	case snap.Covered > 0:
		recs, _, _, err := l.fetchBatch(ctx, p.id, snap.Covered-1, 1<<20)
		if err != nil {
			return nil, "", err
		}
		if len(recs) == 0 || recs[0].koff != snap.Covered-1 || recordSum(recs[0].key, recs[0].headers) != snap.Last {
			return nil, "", fmt.Errorf("the record at offset %d is not the one it ends at (topic deleted and created again?)", snap.Covered-1)
		}
	}
	return snap, note, nil
}

// writeSnapshot writes a captured snapshot to the snapshot topic: a full
// snapshot starts a chain in the slot the manifest does not name, a delta
// extends the chain the manifest names; then the manifest.
func (l *Log) writeSnapshot(ctx context.Context, p *partition, snap *partSnapshot) error {
	b := snap.encode()
	kind := "full"
	if snap.Delta {
		kind = "delta"
	}
	l.cfg.Logf("kafkalog: snapshot of %s/%d at offset %d: writing %d bytes (%s)", l.cfg.Topic, p.id, snap.Covered, len(b), kind)
	m := p.chain
	delta := -1
	if snap.Delta {
		if m == nil {
			return errors.New("a delta without a chain")
		}
		delta = len(m.Deltas)
	} else {
		slot := "a"
		if p.chain != nil && p.chain.Slot == "a" {
			slot = "b"
		}
		m = &manifest{Version: snapshotVersion, Topic: l.cfg.Topic, Partition: p.id, Slot: slot}
	}
	pc := piece{Covered: snap.Covered, Bytes: len(b), First: -1}
	chunkMAC := l.key.newMacer(l.cfg.SnapshotTopic, chunkPartition)
	record := func(m *macer, key string, value []byte) kafka.Record {
		r := kafka.Record{Key: kafka.NewBytes([]byte(key)), Value: kafka.NewBytes(value)}
		if m != nil {
			r.Headers = []kafka.Header{m.header([]byte(key), value, nil)}
		}
		return r
	}
	var recs []kafka.Record
	size := 0
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		res, err := l.producer.Produce(ctx, &kafka.ProduceRequest{Topic: l.cfg.SnapshotTopic, Partition: chunkPartition,
			RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(recs...)})
		if err == nil && res.Error != nil {
			err = res.Error
		}
		if err == nil {
			if pc.First < 0 {
				pc.First = res.BaseOffset
			}
			pc.Last = res.BaseOffset + int64(len(recs)) - 1
		}
		recs, size = recs[:0], 0
		return err
	}
	for i := 0; i*snapshotChunk < len(b) || i == 0; i++ {
		c := b[i*snapshotChunk : min(len(b), (i+1)*snapshotChunk)]
		pc.Chunks = append(pc.Chunks, crc32.Checksum(c, castagnoli))
		recs = append(recs, record(chunkMAC, chunkKey(p.id, m.Slot, delta, i), c))
		if size += len(c); size >= 2<<20 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if l.cfg.SyncSnapshot != nil {
		if err := l.cfg.SyncSnapshot(chunkPartition); err != nil {
			return err
		}
	}
	next := *m
	if snap.Delta {
		next.Deltas = append(append([]piece(nil), m.Deltas...), pc)
	} else {
		next.Full, next.Deltas = pc, nil
	}
	next.Written = time.Now().UTC()
	mb, _ := json.Marshal(next)
	res, err := l.producer.Produce(ctx, &kafka.ProduceRequest{Topic: l.cfg.SnapshotTopic, Partition: manifestPartition,
		RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(record(l.key.newMacer(l.cfg.SnapshotTopic, manifestPartition), manifestKey(p.id), mb))})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		return err
	}
	if l.cfg.SyncSnapshot != nil {
		if err := l.cfg.SyncSnapshot(manifestPartition); err != nil {
			return err
		}
	}
	p.chain = &next
	return nil
}

// snapshotDue reports whether partition p should be snapshotted now, after
// a flush: enough records since the last one, and not too soon.
func (l *Log) snapshotDue(p *partition) bool {
	every := l.cfg.SnapshotRecords
	if every < 0 || p.snapshotRunning.Load() {
		return false
	}
	return p.applied >= int64(every) && time.Since(p.lastSnapshot) >= l.cfg.SnapshotMinInterval
}

// nextIsFull reports whether p's next snapshot must be a full one: no
// chain written since the start, or the chain's deltas weigh as much as its
// full snapshot (and at least 1 MiB), or there are 64 of them.
func (p *partition) nextIsFull() bool {
	c := p.chain
	if c == nil || p.marks == nil {
		return true
	}
	deltas := 0
	for _, d := range c.Deltas {
		deltas += d.Bytes
	}
	return len(c.Deltas) >= 64 || deltas >= max(c.Full.Bytes, 1<<20)
}

// startSnapshot captures partition p on its goroutine and writes the
// snapshot in the background.
func (l *Log) startSnapshot(p *partition) {
	var prev *snapMarks
	if !p.nextIsFull() {
		prev = p.marks
	}
	snap, marks := l.capture(p, prev)
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
		p.marks = marks
		l.cfg.Logf("kafkalog: snapshot of %s/%d at offset %d written (%d streams) in %s", l.cfg.Topic, p.id, snap.Covered,
			len(snap.Streams), time.Since(t0).Round(time.Millisecond))
	}()
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
	var prev *snapMarks
	if !p.nextIsFull() {
		prev = p.marks
	}
	snap, marks := l.capture(p, prev)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.writeSnapshot(ctx, p, snap); err != nil {
		l.cfg.Logf("kafkalog: snapshot of %s/%d at offset %d on close: %v", l.cfg.Topic, p.id, snap.Covered, err)
		return
	}
	p.marks = marks
}

// RestoreInfo says how a partition's state was made on start.
type RestoreInfo struct {
	Partition int32
	// FromSnapshot: loaded from a snapshot covering the records below
	// Covered; then Replayed records were applied; Why says which of its
	// deltas were not used, if any. Otherwise Replayed is the full rebuild
	// and Why says why no snapshot was used.
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
