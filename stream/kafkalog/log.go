// Package kafkalog stores Durable Streams in Kafka: it is the mapping from
// streams, appends, producer fencing, forks and closure onto records of one
// Kafka topic, and the in-memory index that is rebuilt from that topic.
//
// # Layout
//
// All streams share one data topic (default "forklab.streams") with a small,
// fixed number of partitions. A stream lives in exactly one partition: a root
// stream in the partition its name hashes to (murmur2, Kafka's default
// partitioner), a fork in its source's partition. Every operation on a
// stream is one record keyed by the stream name:
//
//	create  the stream's configuration, and its initial bytes as the value
//	append  the appended bytes as the value, producer headers when sent
//	close   closes the stream (an append can close it too: stream-closed: true)
//	delete  removes the stream (TTL expiry writes one too)
//
// Headers name the stream, the operation, the stream generation (how many
// times the name has been created) and a record number within the generation.
// See record.go for the exact names.
//
// A stream offset is the partition and the Kafka offset of the position,
// stamped with the stream generation that issued it (see Offset); an offset
// is accepted back only by the stream it belongs to. The tail offset is one
// past the stream's last data record. A fork shares its source's partition,
// so the offsets it inherits and the ones its own appends get are in one
// Kafka offset space, as the protocol requires.
//
// # Writes
//
// Each partition has one goroutine that decides every write against the
// current state (the fence rules, closure, content type, Stream-Seq), writes
// the accepted records in one produce request with acks=all, has them
// synced (Config.Sync, the embedded broker), and only then makes them
// visible and answers. Requests that arrive while a produce is in flight
// are decided and written together in the next one: group commit, so one
// synced write carries many streams' appends. A write is answered within
// Config.WriteTimeout whatever Kafka does.
//
// # Duplicates, late writes and crashes
//
// A produce is one attempt (kafka-go's Client.Produce, not its Writer,
// which would retry and write a record twice). After a failed write, and on
// every start, the partition goroutine re-reads Kafka from the last
// position it knows and folds in what it finds, so its state is what Kafka
// holds; a write given up on that lands later is found by the next produce
// (it lands behind a record the log did not write) and folded in the same
// way live and on a rebuild (record numbers of failed writes are burnt; the
// fold admits only records the rules admit). A record Kafka holds twice is
// recognised by its record number: the index keeps the later copy.
//
// # Snapshots
//
// Each partition's state is snapshotted to a compacted topic with the data
// offset it covers (snapshot.go, snapshotstore.go); a start loads the latest
// usable snapshot and replays only the records after it.
package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/forklab/forklab/internal/kafkadial"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
)

// Config configures a Log.
type Config struct {
	// Brokers are Kafka bootstrap addresses, host:port.
	Brokers []string
	// Topic is the data topic; default "forklab.streams".
	Topic string
	// Partitions is the partition count used when the topic is created;
	// an existing topic keeps its own. Default 1.
	Partitions int
	// ReplicationFactor for a created topic; -1 (default) takes the
	// broker's default.
	ReplicationFactor int
	// MaxRecordBytes bounds one record's value (an append body); default
	// 1 MiB. The topic is created with max.message.bytes large enough for it.
	MaxRecordBytes int
	// MaxBatchBytes bounds the values group-committed in one produce
	// request; default 4 MiB.
	MaxBatchBytes int
	// CacheBytes bounds record values kept in memory; older values are read
	// back from Kafka when needed. Default 256 MiB.
	CacheBytes int64
	// DialTimeout bounds Open's first contact with Kafka (finding or
	// creating the data topic), retried until then; default
	// kafkadial.DefaultTimeout (forklab log serve --dial-timeout).
	DialTimeout time.Duration
	// WriteTimeout bounds how long a write (append, create, delete) waits
	// for Kafka's acknowledgement before it is answered Unavailable (HTTP
	// 503); default 10s. A write not yet decided by then is withdrawn; one
	// already sent to Kafka may still land, which an idempotent producer's
	// retry then sees as a duplicate.
	WriteTimeout time.Duration
	// Logf logs operational events; nil discards them.
	Logf func(format string, args ...any)
	// SASL, when set, authenticates every connection to Kafka (the
	// embedded broker with tokens: broker.Credentials).
	SASL sasl.Mechanism
	// RecordKeyFile, when set, is the file holding the secret that
	// authenticates the records the log writes (HeaderMAC,
	// recordkey.go), created if missing (mode 0600): the log then folds
	// in no record it did not write. Empty trusts every record with
	// forklab's headers.
	RecordKeyFile string
	// Sync, when set, makes what Kafka acknowledged in a partition
	// durable; it runs after every produce, before the writes it carried
	// are answered. The embedded broker's SyncPartition (fdatasync of the
	// segment files); nil on a real cluster, where acks=all (replication)
	// is the durability.
	Sync func(partition int32) error
	// Journal, when set, makes what Kafka acknowledged durable instead of
	// Sync: each batch is written to a write-ahead file and synced while
	// it is produced (the embedded broker's journal, stream/broker).
	Journal Journal
	// Stages, when set, accumulates where writes spend their time.
	Stages *Stages
	// SnapshotTopic is the compacted topic of state snapshots; default
	// "<Topic>.snapshots".
	SnapshotTopic string
	// SnapshotRecords: a partition's state is snapshotted once this many
	// records were folded in since its last snapshot (and on Close);
	// default 100,000; negative turns snapshots off (every start rebuilds
	// from the data topic).
	SnapshotRecords int
	// SnapshotMinInterval is the least time between two snapshots of a
	// partition; default 10s.
	SnapshotMinInterval time.Duration
	// SyncSnapshot, when set, makes what was written to a partition of
	// the snapshot topic durable (the embedded broker's sync): the chunks
	// before the manifest that names them is written, then the manifest.
	SyncSnapshot func(partition int32) error
	// NoSnapshotOnClose: Close writes no snapshot, as after a crash (for
	// tests and benchmarks of the restart).
	NoSnapshotOnClose bool

	// produceTimeout bounds one produce attempt; default the larger of
	// 30 s and three write timeouts. Tests shorten it.
	produceTimeout time.Duration
}

// Journal is a write-ahead file that makes the batches the log produces
// durable (stream/broker.Journal on the embedded broker). The log calls
// Write with the offset a batch must land at before it produces the
// batch, and waits for it after the produce; it acknowledges the batch
// only when both succeeded and the batch landed there. After a batch that
// failed or landed elsewhere, the log re-reads Kafka; if Kafka holds
// records past the offset the batch was to land at, it calls Checkpoint
// before it writes anything else: the journal's frames then never skip
// records the broker holds but did not make durable. (If nothing landed,
// the next frame has the same offset and replaces the failed one.)
type Journal interface {
	// Write starts making recs durable as the records base, base+1, …
	// of partition; wait returns when they are, or why they are not.
	Write(partition int32, base int64, recs []JournalRecord) (wait func() error)
	// Checkpoint makes everything the broker holds in partition durable
	// in the broker's own files.
	Checkpoint(partition int32) error
}

// JournalRecord is one record as a produce request carries it.
type JournalRecord struct {
	Key, Value []byte
	Headers    []kafka.Header
	// Time is the record's timestamp; zero leaves it to the broker.
	Time time.Time
}

// DefaultTopic is the data topic when Config.Topic is empty.
const DefaultTopic = "forklab.streams"

func (c *Config) defaults() {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.Partitions <= 0 {
		c.Partitions = 1
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.MaxRecordBytes <= 0 {
		c.MaxRecordBytes = 1 << 20
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = 4 << 20
	}
	if c.MaxBatchBytes < c.MaxRecordBytes+64<<10 {
		c.MaxBatchBytes = c.MaxRecordBytes + 64<<10
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = 256 << 20
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.SnapshotTopic == "" {
		c.SnapshotTopic = c.Topic + ".snapshots"
	}
	if c.SnapshotRecords == 0 {
		c.SnapshotRecords = 100_000
	}
	if c.SnapshotMinInterval <= 0 {
		c.SnapshotMinInterval = 10 * time.Second
	}
	if c.produceTimeout <= 0 {
		// Well past the write timeout (callers are answered at the write
		// timeout anyway): an answer is worth more than a guess.
		c.produceTimeout = max(30*time.Second, 3*c.WriteTimeout)
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Log is the set of streams stored in one Kafka topic.
type Log struct {
	cfg       Config
	client    *kafka.Client // metadata, fetches, offsets: 10 s per request
	producer  *kafka.Client // produce requests: the caller's deadline only
	transport *kafka.Transport
	parts     []*partition
	cache     *cache
	// key authenticates records (Config.RecordKeyFile); nil trusts all.
	key *recordKey

	// readSlots holds a token per read-path fetch request in flight
	// (maxReadFetches; read.go).
	readSlots chan struct{}
	// readFetchHook, in tests, is called by each read-path fetch request
	// before it is sent, with the number of them in flight.
	readFetchHook func(inFlight int)

	// admin serialises creates and deletes: a semaphore rather than a
	// mutex, so that waiting for it is bounded by the write timeout, and so
	// that a create or delete still waiting for Kafka after its caller was
	// answered keeps it until Kafka answers.
	admin chan struct{}

	mu      sync.RWMutex
	streams map[string]*stream
	gens    map[string]int64 // highest generation seen per name
	removed map[string]int64 // highest generation deleted per name

	stop chan struct{}
	wg   sync.WaitGroup

	// starting is set while Open folds the data topic in, before anyone
	// reads: values are not cached (reads fetch them when they need them).
	starting bool
}

// Open connects to Kafka, creates the data topic if it is missing and
// rebuilds every stream from the topic before returning.
func Open(ctx context.Context, cfg Config) (*Log, error) {
	cfg.defaults()
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafkalog: no brokers")
	}
	tr := &kafka.Transport{DialTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, MetadataTTL: 5 * time.Second, SASL: cfg.SASL}
	l := &Log{
		cfg:       cfg,
		transport: tr,
		client:    &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr, Timeout: 10 * time.Second},
		producer:  &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr},
		cache:     newCache(cfg.CacheBytes),
		readSlots: make(chan struct{}, maxReadFetches),
		streams:   map[string]*stream{},
		gens:      map[string]int64{},
		removed:   map[string]int64{},
		admin:     make(chan struct{}, 1),
		stop:      make(chan struct{}),
	}
	var n int
	err := kafkadial.Reach(ctx, cfg.Brokers, cfg.DialTimeout, func(ctx context.Context) (err error) {
		n, err = l.ensureTopic(ctx)
		return err
	})
	if err != nil {
		l.transport.CloseIdleConnections()
		return nil, err
	}
	if cfg.RecordKeyFile != "" {
		if l.key, err = l.loadRecordKey(ctx, cfg.RecordKeyFile, n); err != nil {
			l.transport.CloseIdleConnections()
			return nil, err
		}
	}
	for p := 0; p < n; p++ {
		l.parts = append(l.parts, newPartition(l, int32(p)))
	}
	l.starting = true
	if cfg.SnapshotRecords >= 0 {
		if err := l.restore(ctx); err != nil {
			l.transport.CloseIdleConnections()
			return nil, err
		}
	}
	for _, p := range l.parts {
		if err := p.catchUp(ctx, true); err != nil {
			l.transport.CloseIdleConnections()
			return nil, fmt.Errorf("rebuild partition %d of %s: %w", p.id, cfg.Topic, err)
		}
	}
	l.starting = false
	for _, s := range l.streams {
		s.touch() // a restart opens a fresh TTL window; reads are not logged
	}
	for _, p := range l.parts {
		l.wg.Add(1)
		go p.run()
	}
	l.wg.Add(1)
	go l.expireLoop()
	return l, nil
}

// Close stops the partition goroutines and the Kafka writers. Requests in
// flight are answered first.
func (l *Log) Close() error {
	select {
	case <-l.stop:
		return nil
	default:
	}
	close(l.stop)
	l.wg.Wait()
	l.transport.CloseIdleConnections()
	return nil
}

// restore loads every partition's usable snapshot, before the rebuild
// replays what follows it.
func (l *Log) restore(ctx context.Context) error {
	if err := l.ensureSnapshotTopic(ctx); err != nil {
		return err
	}
	snaps, why, err := l.loadSnapshots(ctx)
	if err != nil {
		l.cfg.Logf("kafkalog: reading snapshots from %s: %v; rebuilding from %s", l.cfg.SnapshotTopic, err, l.cfg.Topic)
		for _, p := range l.parts {
			p.why = err.Error()
		}
		return nil
	}
	for _, p := range l.parts {
		if snap := snaps[p.id]; snap != nil {
			err := l.install(p, snap)
			if err == nil {
				// Used, perhaps without its last deltas (why says).
				if p.why = why[p.id]; p.why != "" {
					l.cfg.Logf("kafkalog: snapshot of %s/%d: %s", l.cfg.Topic, p.id, p.why)
				}
				continue
			}
			why[p.id] = err.Error()
			l.resetPartition(p)
		}
		p.why = why[p.id]
		if p.why != "no snapshot" {
			l.cfg.Logf("kafkalog: snapshot of %s/%d not used (%s); rebuilding it from %s", l.cfg.Topic, p.id, p.why, l.cfg.Topic)
		}
	}
	return nil
}

// resetPartition forgets what a snapshot that could not be installed put
// in partition p's state.
func (l *Log) resetPartition(p *partition) {
	l.mu.Lock()
	for name, s := range l.streams {
		if s.meta.part == p.id {
			delete(l.streams, name)
		}
	}
	l.mu.Unlock()
	p.gens, p.removed = map[string]int64{}, map[string]int64{}
	p.next, p.lastRecord, p.restored, p.covered, p.chain = 0, 0, false, 0, nil
}

// adminLock is a held admin lock.
type adminLock struct {
	l    *Log
	held bool
}

// lockAdmin takes the admin lock, waiting at most the write timeout.
func (l *Log) lockAdmin(ctx context.Context) (*adminLock, error) {
	t := time.NewTimer(l.cfg.WriteTimeout)
	defer t.Stop()
	select {
	case l.admin <- struct{}{}:
		return &adminLock{l: l, held: true}, nil
	case <-t.C:
		return nil, errf(Unavailable, "another create or delete is still waiting for Kafka; nothing was written: retry")
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.stop:
		return nil, errf(Unavailable, "log is shutting down")
	}
}

// release gives the lock back, unless a late op took it over.
func (a *adminLock) release() {
	if a.held {
		a.held = false
		<-a.l.admin
	}
}

// submit submits an op under the lock. When the op is still waiting for
// Kafka after the write timeout, the lock stays taken until Kafka answers
// it (and release becomes a no-op).
func (a *adminLock) submit(ctx context.Context, p *partition, o *op) error {
	late, err := p.submit(ctx, o)
	if late != nil && a.held {
		a.held = false
		go func() {
			<-late
			<-a.l.admin
		}()
	}
	return err
}

// Topic is the data topic's name.
func (l *Log) Topic() string { return l.cfg.Topic }

// Partitions is the data topic's partition count.
func (l *Log) Partitions() int { return len(l.parts) }

// MaxRecordBytes is the largest append body the log stores.
func (l *Log) MaxRecordBytes() int { return l.cfg.MaxRecordBytes }

// ensureTopic creates the data topic if needed and returns its partition count.
func (l *Log) ensureTopic(ctx context.Context) (int, error) {
	if n, err := l.topicPartitions(ctx); err == nil && n > 0 {
		return n, nil
	}
	maxMsg := l.cfg.MaxBatchBytes + 1<<20
	res, err := l.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic:             l.cfg.Topic,
		NumPartitions:     l.cfg.Partitions,
		ReplicationFactor: l.cfg.ReplicationFactor,
		ConfigEntries: []kafka.ConfigEntry{
			// Keys are stream names: compaction would keep one record
			// per stream. Retention by time or size only.
			{ConfigName: "cleanup.policy", ConfigValue: "delete"},
			{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(maxMsg)},
		},
	}}})
	if err != nil {
		return 0, fmt.Errorf("create topic %s: %w", l.cfg.Topic, err)
	}
	if e := res.Errors[l.cfg.Topic]; e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
		return 0, fmt.Errorf("create topic %s: %w", l.cfg.Topic, e)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := l.topicPartitions(ctx)
		if err == nil && n > 0 {
			return n, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("topic %s not visible after creation: %v", l.cfg.Topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (l *Log) topicPartitions(ctx context.Context) (int, error) {
	md, err := l.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{l.cfg.Topic}})
	if err != nil {
		return 0, err
	}
	for _, t := range md.Topics {
		if t.Name == l.cfg.Topic {
			if t.Error != nil {
				return 0, t.Error
			}
			return len(t.Partitions), nil
		}
	}
	return 0, fmt.Errorf("topic %s not found", l.cfg.Topic)
}

// rootPartition is the partition a root stream named name lives in: Kafka's
// default (murmur2) partitioner over the name, so Kafka clients that route
// by key agree.
func (l *Log) rootPartition(name string) int32 {
	ps := make([]int, len(l.parts))
	for i := range ps {
		ps[i] = i
	}
	return int32(kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: []byte(name)}, ps...))
}

// lookup returns the live stream named name: NotFound when there is none or
// its TTL or expiry has passed, Gone when it is soft-deleted.
func (l *Log) lookup(name string) (*stream, error) {
	l.mu.RLock()
	s := l.streams[name]
	l.mu.RUnlock()
	if s == nil {
		return nil, errNotFound
	}
	v := s.snapshot()
	if v.removed {
		return nil, errNotFound
	}
	if v.soft {
		return nil, errSoftGone
	}
	if s.expired(time.Now()) {
		return nil, errNotFound
	}
	return s, nil
}

// Info is a stream's metadata, what HEAD reports.
type Info struct {
	Name        string
	ContentType string
	Tail        Offset
	Closed      bool
	TTL         int64 // seconds; -1 when none
	ExpiresAt   time.Time
	// ID identifies the stream generation, for ETags.
	ID string
	// ForkedFrom is the source stream of a fork, "" for a root.
	ForkedFrom string
}

func (s *stream) info() Info {
	v := s.snapshot()
	return Info{
		Name:        s.meta.name,
		ContentType: s.meta.contentType,
		Tail:        s.mint(v.tail),
		Closed:      v.closed,
		TTL:         s.meta.ttl,
		ExpiresAt:   s.meta.expiresAt,
		ID:          streamID(s.meta.name, s.meta.gen),
		ForkedFrom:  s.meta.forkedFrom,
	}
}

// streamID is a short, stable identifier of one stream generation.
func streamID(name string, gen int64) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf("%016x.%d", h.Sum64(), gen)
}

// Head returns a stream's metadata. It does not reset the stream's TTL.
func (l *Log) Head(name string) (Info, error) {
	s, err := l.lookup(name)
	if err != nil {
		return Info{}, err
	}
	return s.info(), nil
}

// ProducerState returns the committed state of a producer on a stream: its
// epoch and highest accepted seq; known is false for a producer the stream
// has not seen.
func (l *Log) ProducerState(name, producerID string) (epoch, seq int64, known bool, err error) {
	s, err := l.lookup(name)
	if err != nil {
		return 0, 0, false, err
	}
	s.mu.RLock()
	st, ok := s.producers[producerID]
	s.mu.RUnlock()
	return st.Epoch, st.LastSeq, ok && st.Known, nil
}

// Names lists the live streams, sorted.
func (l *Log) Names() []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []string
	for n, s := range l.streams {
		if !s.snapshot().soft {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Location reports where a stream's records are: topic and partition.
func (l *Log) Location(name string) (topic string, partition int32, err error) {
	s, err := l.lookup(name)
	if err != nil {
		return "", 0, err
	}
	return l.cfg.Topic, s.meta.part, nil
}
