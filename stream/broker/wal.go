package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// The write-ahead file (the journal) makes an acknowledged append durable
// with one cheap fdatasync: the log writes each produced batch to a file
// of its partition that was allocated and zero-filled in advance, and
// fdatasyncs it, while the same batch is produced to kfake, whose own
// segment files are synced only at checkpoints. An fdatasync of an
// overwrite inside a file's allocated, written region needs no journal
// commit of the file system's metadata (size, extents); one after an
// append that grows a file does (docs/session-log.md, "Where an append's
// time goes", has the figures on this disk).
//
// Layout of DATA/wal/TOPIC-PART.wal (TOPIC path-escaped), little-endian:
//
//	header, walHeaderSize bytes: magic "FLWAL1\n\x00", epoch u64,
//	  partition i32, topic length u16, topic, crc32c of what precedes it
//	frames from walHeaderSize on, each:
//	  payload length u32, crc32c of the payload u32, payload:
//	    epoch u64, base offset i64, record count u32, then per record:
//	    timestamp ms i64 (0: none), key length i32 (-1: nil), key,
//	    value length i32 (-1: nil), value, header count u16, per header:
//	    key length u16, key, value length i32, value
//
// A frame says: the records base, base+1, … of the partition are these. A
// reader takes frames from the start while each is whole, its checksum
// matches and its epoch is the header's; the first that is not ends the
// file (zeros, a torn write, or a frame of an earlier epoch). When a frame
// does not fit in the space left, the broker first makes kfake's files of
// the partition durable (a checkpoint: every record it holds is then on
// disk without the journal), then starts a new epoch at the beginning.
//
// On start (Start), before anything is served, the records the journal
// holds beyond the partition's high watermark (what kfake reloaded) are
// produced again, in order, each landing at the offset it was
// acknowledged at; then the partition is checkpointed and the journal
// starts a new epoch. See recoverFrames for the rules that make this
// idempotent.

const (
	walMagic      = "FLWAL1\n\x00"
	walHeaderSize = 4096
	// DefaultJournalBytes is the size of a partition's write-ahead file.
	DefaultJournalBytes = 16 << 20
	walDir              = "wal"
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Record is one record written through the journal: what a produce
// request carries for it.
type Record struct {
	Key, Value []byte // nil stays nil
	Headers    []kafka.Header
	// Time is the record's timestamp; zero leaves it to the broker.
	Time time.Time
}

// Journal is the write-ahead file of one topic of the embedded broker
// (see the comment at the top of wal.go). Write and Checkpoint for one
// partition must come from one goroutine.
type Journal struct {
	b     *Broker
	topic string

	mu    sync.Mutex
	parts map[int32]*walFile
}

// walFile is one partition's write-ahead file.
type walFile struct {
	f     *os.File
	path  string
	size  int64 // the file's (preallocated) size
	pos   int64 // where the next frame goes
	epoch uint64
	part  int32
	topic string
	buf   []byte
}

// Journal returns the write-ahead journal of topic's partitions; nil when
// the broker does not sync (Config.NoSync, Config.KfakeSync).
func (b *Broker) Journal(topic string) *Journal {
	if !b.sync {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if j := b.journals[topic]; j != nil {
		return j
	}
	j := &Journal{b: b, topic: topic, parts: map[int32]*walFile{}}
	b.journals[topic] = j
	return j
}

// Write makes recs durable as the records base, base+1, … of partition
// part: it writes them to the partition's write-ahead file now and
// fdatasyncs the file in the background, so that the caller can produce
// the same records to the broker meanwhile. wait returns once the sync is
// done; the caller acknowledges the records only when wait returned nil
// and the produce landed them at base. A batch that then lands elsewhere,
// or not at all, must be followed by Checkpoint before the next Write (see
// recoverFrames). wait must be called before the next Write.
func (j *Journal) Write(part int32, base int64, recs []Record) (wait func() error) {
	w, err := j.file(part)
	if err != nil {
		return func() error { return err }
	}
	w.buf = appendFrame(w.buf[:0], w.epoch, base, recs)
	if int64(len(w.buf)) > w.size-walHeaderSize {
		// Larger than the whole file: kfake's own files carry the
		// batch, synced once it landed.
		return func() error { return j.Checkpoint(part) }
	}
	if w.pos+int64(len(w.buf)) > w.size {
		if err := j.b.syncPartitionFiles(j.topic, part); err != nil {
			return func() error { return fmt.Errorf("journal checkpoint: %w", err) }
		}
		if err := w.newEpoch(); err != nil {
			return func() error { return err }
		}
	}
	if _, err := w.f.WriteAt(w.buf, w.pos); err != nil {
		return func() error { return fmt.Errorf("journal %s: %w", w.path, err) }
	}
	w.pos += int64(len(w.buf))
	done := make(chan error, 1)
	go func() { done <- fdatasync(w.f) }()
	return func() error {
		if err := <-done; err != nil {
			return fmt.Errorf("journal %s: %w", w.path, err)
		}
		return nil
	}
}

// Checkpoint makes every record the broker holds in partition part durable
// in kfake's own files (every segment that grew, and the directory) and
// starts a new epoch of the partition's write-ahead file: the frames
// written so far are no longer needed.
func (j *Journal) Checkpoint(part int32) error {
	if err := j.b.syncPartitionFiles(j.topic, part); err != nil {
		return fmt.Errorf("journal checkpoint: %w", err)
	}
	w, err := j.file(part)
	if err != nil {
		return err
	}
	return w.newEpoch()
}

// file opens (creating) the write-ahead file of partition part.
func (j *Journal) file(part int32) (*walFile, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if w := j.parts[part]; w != nil {
		return w, nil
	}
	// What kfake wrote since the start (the topic it created, its
	// metadata) is synced before the journal covers the records.
	if err := syncTree(j.b.dir); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	w, err := openWAL(j.b.walDir, j.topic, part, j.b.walBytes)
	if err != nil {
		return nil, err
	}
	j.parts[part] = w
	return w, nil
}

// close closes the journal's files, starting a new epoch in each first
// when synced says kfake's files hold everything.
func (j *Journal) close(synced bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, w := range j.parts {
		if synced {
			w.newEpoch()
		}
		w.f.Close()
	}
	j.parts = map[int32]*walFile{}
}

// walPath is the write-ahead file of topic's partition part in dir.
func walPath(dir, topic string, part int32) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%d.wal", url.PathEscape(topic), part))
}

// openWAL opens the write-ahead file of topic's partition part, creating
// it zero-filled at size bytes (and syncing it and its directory) when it
// is missing or shorter, and starts a new epoch in it: whatever it held
// was recovered on start.
func openWAL(dir, topic string, part int32, size int64) (*walFile, error) {
	path := walPath(dir, topic, part)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	w := &walFile{f: f, path: path, size: size, part: part, topic: topic}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	if st.Size() < size {
		// Zeros written, not a hole or fallocate's unwritten extents:
		// overwriting either would change the file's metadata, and every
		// fdatasync would commit the file system's journal.
		zero := make([]byte, 1<<20)
		for off := st.Size(); off < size; off += int64(len(zero)) {
			n := min(int64(len(zero)), size-off)
			if _, err := f.WriteAt(zero[:n], off); err != nil {
				f.Close()
				return nil, fmt.Errorf("journal %s: %w", path, err)
			}
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal %s: %w", path, err)
		}
		if err := syncDir(dir); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal %s: %w", dir, err)
		}
	} else {
		w.size = st.Size()
	}
	if h, err := readWALHeader(f); err == nil {
		w.epoch = h.epoch
	}
	if err := w.newEpoch(); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// newEpoch starts the file over: the header with the next epoch, synced,
// makes every frame in it stale.
func (w *walFile) newEpoch() error {
	w.epoch++
	h := make([]byte, walHeaderSize)
	n := encodeWALHeader(h, w.epoch, w.topic, w.part)
	if _, err := w.f.WriteAt(h[:n], 0); err != nil {
		return fmt.Errorf("journal %s: %w", w.path, err)
	}
	if err := fdatasync(w.f); err != nil {
		return fmt.Errorf("journal %s: %w", w.path, err)
	}
	w.pos = walHeaderSize
	return nil
}

func encodeWALHeader(h []byte, epoch uint64, topic string, part int32) int {
	copy(h, walMagic)
	binary.LittleEndian.PutUint64(h[8:], epoch)
	binary.LittleEndian.PutUint32(h[16:], uint32(part))
	binary.LittleEndian.PutUint16(h[20:], uint16(len(topic)))
	n := 22 + copy(h[22:], topic)
	binary.LittleEndian.PutUint32(h[n:], crc32.Checksum(h[:n], crc32c))
	return n + 4
}

type walHeader struct {
	epoch uint64
	part  int32
	topic string
}

var errNoHeader = errors.New("no valid journal header")

func readWALHeader(r io.ReaderAt) (walHeader, error) {
	h := make([]byte, walHeaderSize)
	if _, err := r.ReadAt(h, 0); err != nil && !errors.Is(err, io.EOF) {
		return walHeader{}, err
	}
	if string(h[:8]) != walMagic {
		return walHeader{}, errNoHeader
	}
	tl := int(binary.LittleEndian.Uint16(h[20:]))
	n := 22 + tl
	if n+4 > len(h) || binary.LittleEndian.Uint32(h[n:]) != crc32.Checksum(h[:n], crc32c) {
		return walHeader{}, errNoHeader
	}
	return walHeader{epoch: binary.LittleEndian.Uint64(h[8:]), part: int32(binary.LittleEndian.Uint32(h[16:])),
		topic: string(h[22:n])}, nil
}

// appendFrame appends the frame of recs at base in epoch to buf.
func appendFrame(buf []byte, epoch uint64, base int64, recs []Record) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, 8)...) // length, crc
	buf = binary.LittleEndian.AppendUint64(buf, epoch)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(base))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(recs)))
	for _, r := range recs {
		var ts int64
		if !r.Time.IsZero() {
			ts = r.Time.UnixMilli()
		}
		buf = binary.LittleEndian.AppendUint64(buf, uint64(ts))
		buf = appendBytes32(buf, r.Key)
		buf = appendBytes32(buf, r.Value)
		buf = binary.LittleEndian.AppendUint16(buf, uint16(len(r.Headers)))
		for _, h := range r.Headers {
			buf = binary.LittleEndian.AppendUint16(buf, uint16(len(h.Key)))
			buf = append(buf, h.Key...)
			buf = appendBytes32(buf, h.Value)
		}
	}
	payload := buf[start+8:]
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, crc32c))
	return buf
}

func appendBytes32(buf, b []byte) []byte {
	if b == nil {
		return binary.LittleEndian.AppendUint32(buf, uint32(0xffffffff))
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(b)))
	return append(buf, b...)
}

// frame is one decoded frame: records base, base+1, … of the partition.
type frame struct {
	base int64
	recs []Record
}

// readFrames decodes the frames of epoch in raw (the file from
// walHeaderSize on) up to the first that is not whole, checksummed and of
// epoch.
func readFrames(raw []byte, epoch uint64) []frame {
	var out []frame
	for len(raw) >= 8 {
		n := int(binary.LittleEndian.Uint32(raw))
		if n < 20 || n > len(raw)-8 {
			break
		}
		payload := raw[8 : 8+n]
		if crc32.Checksum(payload, crc32c) != binary.LittleEndian.Uint32(raw[4:]) {
			break
		}
		if binary.LittleEndian.Uint64(payload) != epoch {
			break
		}
		f, ok := decodeFrame(payload)
		if !ok {
			break
		}
		out = append(out, f)
		raw = raw[8+n:]
	}
	return out
}

func decodeFrame(p []byte) (frame, bool) {
	d := decoder{b: p[8:]}
	f := frame{base: int64(d.u64())}
	n := int(d.u32())
	if d.bad || n > len(d.b) {
		return frame{}, false
	}
	f.recs = make([]Record, n)
	for i := range f.recs {
		r := &f.recs[i]
		if ts := int64(d.u64()); ts != 0 {
			r.Time = time.UnixMilli(ts)
		}
		r.Key = d.bytes32()
		r.Value = d.bytes32()
		nh := int(d.u16())
		if d.bad || nh > len(d.b) {
			return frame{}, false
		}
		if nh > 0 {
			r.Headers = make([]kafka.Header, nh)
		}
		for k := range r.Headers {
			r.Headers[k].Key = string(d.take(int(d.u16())))
			r.Headers[k].Value = d.bytes32()
		}
	}
	if d.bad || len(d.b) != 0 {
		return frame{}, false
	}
	return f, true
}

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || n < 0 || n > len(d.b) {
		d.bad = true
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u16() uint16 {
	if b := d.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) bytes32() []byte {
	n := d.u32()
	if n == 0xffffffff {
		return nil
	}
	b := d.take(int(n))
	if b == nil && !d.bad {
		return []byte{}
	}
	return b
}

// recoverFrames is what the journal's frames, in file order, say the
// partition holds from some offset on: the records from start. A frame
// replaces every record at or after its base that earlier frames gave (a
// batch whose produce failed is written again at the same base by the
// next batch); a frame that starts past the records so far follows a
// checkpoint (after a produce that landed elsewhere the log checkpoints
// before it writes again, so everything before that frame is in kfake's
// synced files) and starts the records over.
func recoverFrames(frames []frame) (start int64, recs []Record) {
	for _, f := range frames {
		end := start + int64(len(recs))
		switch {
		case len(recs) == 0 || f.base > end || f.base < start:
			start, recs = f.base, append([]Record(nil), f.recs...)
		default:
			recs = append(recs[:f.base-start], f.recs...)
		}
	}
	return start, recs
}

// recoverJournals produces again, for every write-ahead file in the
// broker's journal directory, the records it holds beyond its partition's
// high watermark, then checkpoints the partition. It runs in Start, before
// the broker's address is handed to anyone.
func (b *Broker) recoverJournals() error {
	ents, err := os.ReadDir(b.walDir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	var client *kafka.Client
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".wal") || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(b.walDir, e.Name())
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		h, err := readWALHeader(bytesReaderAt(raw))
		if err != nil || len(raw) < walHeaderSize {
			continue // never written to (a crash while it was created)
		}
		start, recs := recoverFrames(readFrames(raw[walHeaderSize:], h.epoch))
		if len(recs) == 0 {
			continue
		}
		if client == nil {
			client = &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 30 * time.Second,
				Transport: &kafka.Transport{SASL: b.SASL()}}
		}
		n, err := b.reproduce(client, h.topic, h.part, start, recs)
		if err != nil {
			return fmt.Errorf("journal %s: %w", path, err)
		}
		if n > 0 {
			b.Recovered += n
		}
		if err := b.syncPartitionFiles(h.topic, h.part); err != nil {
			return fmt.Errorf("journal %s: %w", path, err)
		}
	}
	return nil
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// reproduce produces the records of recs (the records from offset start)
// that lie at or beyond the partition's high watermark, in order, checking
// each lands at the offset the journal gives it. It returns how many it
// produced.
func (b *Broker) reproduce(client *kafka.Client, topic string, part int32, start int64, recs []Record) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lo, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.LastOffsetOf(int(part))}}})
	if err != nil {
		return 0, fmt.Errorf("high watermark of %s/%d: %w", topic, part, err)
	}
	var hw int64 = -1
	for _, p := range lo.Topics[topic] {
		if p.Partition == int(part) {
			if p.Error != nil {
				return 0, fmt.Errorf("high watermark of %s/%d: %w", topic, part, p.Error)
			}
			hw = p.LastOffset
		}
	}
	if hw < 0 {
		return 0, fmt.Errorf("high watermark of %s/%d: partition not found", topic, part)
	}
	if start > hw {
		return 0, fmt.Errorf("%s/%d: the broker holds records up to offset %d but the journal starts at %d: records %d to %d are in neither; the data directory was damaged",
			topic, part, hw, start, hw, start-1)
	}
	todo := recs[hw-start:]
	produced := 0
	for len(todo) > 0 {
		n, bytes := 0, 0
		for n < len(todo) && n < 1024 && (n == 0 || bytes+len(todo[n].Value) < 4<<20) {
			bytes += len(todo[n].Value)
			n++
		}
		krecs := make([]kafka.Record, n)
		for i, r := range todo[:n] {
			krecs[i] = kafka.Record{Key: kafka.NewBytes(r.Key), Value: kafka.NewBytes(r.Value), Headers: r.Headers, Time: r.Time}
		}
		want := hw + int64(produced)
		res, err := client.Produce(ctx, &kafka.ProduceRequest{Topic: topic, Partition: int(part),
			RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(krecs...)})
		if err == nil && res.Error != nil {
			err = res.Error
		}
		if err == nil {
			for i, e := range res.RecordErrors {
				err = fmt.Errorf("record %d: %w", i, e)
				break
			}
		}
		if err != nil {
			return produced, fmt.Errorf("produce the journal's records from %d to %s/%d: %w", want, topic, part, err)
		}
		if res.BaseOffset != want {
			return produced, fmt.Errorf("the journal's records from %d landed at %d in %s/%d", want, res.BaseOffset, topic, part)
		}
		produced += n
		todo = todo[n:]
	}
	return produced, nil
}
