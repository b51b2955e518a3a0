package scaleout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/forklab/forklab/internal/kafkadial"
	"github.com/segmentio/kafka-go"
)

// Queue names the Kafka cluster, topics and consumer group that a pool of
// workers shares. Every sweep published on a queue goes to the same two
// topics:
//
//   - NAME.units: one record per unit of work (UnitMsg), spread round-robin
//     over the partitions by the unit's position in its sweep; the workers
//     read it as the consumer group NAME.workers.
//   - NAME.results: the workers' reports (Report: a unit started, its
//     progress, done, failed) and the coordinators' (published, finalized),
//     keyed by sweep id; each coordinator reads every partition and keeps
//     its own sweep's.
//
// A queue's workers serve whatever sweep is published on it; separate
// pools (say, machines with an agent's API keys and machines without) use
// separate queue names.
type Queue struct {
	// Brokers are the bootstrap brokers, host:port.
	Brokers []string
	// Name is the topics' prefix and the group's; default DefaultQueue.
	Name string
	// Partitions is the units topic's partition count when it is created
	// (default DefaultPartitions; a coordinator asking more grows the
	// topic). At most this many workers take units at once.
	Partitions int
	// Replication is the topics' replication factor when they are
	// created; 0 means 3, or the cluster's broker count when it has fewer.
	Replication int
	// DialTimeout bounds the first contact with the cluster (connecting,
	// creating or finding the topics), retried until then: --dial-timeout,
	// default kafkadial.DefaultTimeout.
	DialTimeout time.Duration
	// RetryFor is how long a worker or coordinator rides out a cluster it
	// cannot reach once it is running (a broker restarting, a network
	// cut), retrying with backoff, before it stops with an error saying
	// so: --retry-for, default kafkadial.DefaultRetryFor. Errors of a
	// cluster that answers (a rebalance in progress) never stop it.
	RetryFor time.Duration
}

// DefaultQueue is the queue of forklab sweep --distributed and forklab
// worker when no --queue is given; DefaultPartitions the units topic's
// partition count.
const (
	DefaultQueue      = "forklab.sweeps"
	DefaultPartitions = 32
)

// resultsPartitions is the results topic's partition count: its records
// are few (a handful per unit) and every coordinator reads them all.
const resultsPartitions = 4

// retention keeps the queue's records a week: a coordinator restarted
// within it finds its sweep's reports (and the staging directory's ledger
// covers anything older).
const retention = 7 * 24 * time.Hour

func (q Queue) name() string {
	if q.Name == "" {
		return DefaultQueue
	}
	return q.Name
}

// UnitsTopic is the topic of work units.
func (q Queue) UnitsTopic() string { return q.name() + ".units" }

// ResultsTopic is the topic of reports.
func (q Queue) ResultsTopic() string { return q.name() + ".results" }

// Group is the workers' consumer group.
func (q Queue) Group() string { return q.name() + ".workers" }

// conn is a queue's connection: an admin client and one writer for both
// topics, sharing a transport so that the writer sees the topics the
// client created (kafka-go caches metadata per transport).
type conn struct {
	q      Queue
	tr     *kafka.Transport
	client *kafka.Client
	w      *kafka.Writer
	// brokers is the cluster's broker count.
	brokers int
	// watch tracks whether the cluster answers (a metadata request every
	// probeEvery); produce and the fetch loops give up only once it says
	// the cluster has been unreachable for longer than Queue.RetryFor.
	watch     *kafkadial.Watch
	stopWatch context.CancelFunc
	// retries counts writes retried.
	retries atomic.Int64
}

// probeEvery is how often a running worker or coordinator checks that
// its cluster answers.
const probeEvery = time.Second

// dial connects to the queue's cluster and creates its topics if they are
// missing, waiting until every partition has a leader.
func dial(ctx context.Context, q Queue) (*conn, error) {
	if len(q.Brokers) == 0 {
		return nil, errors.New("no Kafka brokers given (--brokers host:port,…)")
	}
	tr := &kafka.Transport{DialTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, MetadataTTL: 2 * time.Second}
	c := &conn{q: q, tr: tr, client: &kafka.Client{Addr: kafka.TCP(q.Brokers...), Transport: tr, Timeout: 10 * time.Second}}
	c.w = &kafka.Writer{
		Addr: kafka.TCP(q.Brokers...),
		// Acknowledged by every in-sync replica: a unit published, or a
		// unit reported done, survives the loss of a broker.
		RequiredAcks: kafka.RequireAll,
		Balancer:     balancer{},
		// The spec travels in every unit record; compressed, the copies
		// cost little.
		Compression:     kafka.Zstd,
		BatchSize:       1000,
		BatchBytes:      16 << 20,
		BatchTimeout:    2 * time.Millisecond,
		MaxAttempts:     10,
		WriteBackoffMin: 50 * time.Millisecond,
		WriteBackoffMax: time.Second,
		ReadTimeout:     10 * time.Second,
		WriteTimeout:    10 * time.Second,
		Transport:       tr,
	}
	c.watch = kafkadial.NewWatch(q.Brokers, q.RetryFor)
	c.stopWatch = func() {}
	if err := kafkadial.Reach(ctx, q.Brokers, q.DialTimeout, c.ensureTopics); err != nil {
		c.close()
		return nil, err
	}
	wctx, stop := context.WithCancel(context.Background())
	c.stopWatch = stop
	go c.watch.Run(wctx, probeEvery, kafkadial.Probe(q.Brokers))
	return c, nil
}

// close flushes the writer, waiting at most 10s: with the cluster out of
// reach a write in flight would wait for its connection's own timeouts.
func (c *conn) close() {
	c.stopWatch()
	done := make(chan struct{})
	go func() { c.w.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	c.tr.CloseIdleConnections()
}

// ensureTopics creates the units and results topics if they are missing
// (another process creating them at the same moment is fine), grows the
// units topic to q.Partitions if it has fewer, and waits until the
// metadata shows every partition with a leader.
func (c *conn) ensureTopics(ctx context.Context) error {
	md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return fmt.Errorf("kafka %v: %w", c.q.Brokers, err)
	}
	c.brokers = len(md.Brokers)
	rf := c.q.Replication
	if rf <= 0 {
		rf = min(3, c.brokers)
	}
	parts := c.q.Partitions
	if parts <= 0 {
		parts = DefaultPartitions
	}
	want := map[string]int{c.q.UnitsTopic(): parts, c.q.ResultsTopic(): resultsPartitions}
	have := map[string]int{}
	for _, t := range md.Topics {
		if t.Error == nil {
			have[t.Name] = len(t.Partitions)
		}
	}
	var create []kafka.TopicConfig
	for name, n := range want {
		if have[name] > 0 {
			continue
		}
		entries := []kafka.ConfigEntry{
			{ConfigName: "cleanup.policy", ConfigValue: "delete"},
			{ConfigName: "retention.ms", ConfigValue: strconv.FormatInt(retention.Milliseconds(), 10)},
		}
		if rf >= 3 {
			// With acks from all in-sync replicas, at least two of them.
			entries = append(entries, kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: "2"})
		}
		create = append(create, kafka.TopicConfig{Topic: name, NumPartitions: n, ReplicationFactor: rf, ConfigEntries: entries})
	}
	if len(create) > 0 {
		res, err := c.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: create})
		if err != nil {
			return fmt.Errorf("create topics: %w", err)
		}
		for name, e := range res.Errors {
			if e != nil && !errors.Is(e, kafka.TopicAlreadyExists) {
				return fmt.Errorf("create topic %s: %w", name, e)
			}
		}
	}
	if n := have[c.q.UnitsTopic()]; n > 0 && c.q.Partitions > n {
		res, err := c.client.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: c.q.UnitsTopic(), Count: int32(c.q.Partitions)}}})
		if err == nil {
			err = res.Errors[c.q.UnitsTopic()]
		}
		if err != nil {
			return fmt.Errorf("grow topic %s to %d partitions: %w", c.q.UnitsTopic(), c.q.Partitions, err)
		}
		want[c.q.UnitsTopic()] = c.q.Partitions
	}
	// A topic just created is not at once in every broker's metadata.
	deadline := time.Now().Add(15 * time.Second)
	for {
		ready, why := c.topicsReady(ctx, want)
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topics not ready 15s after creation: %s", why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// topicsReady reports whether every topic of want shows at least its
// partitions, each with a leader.
func (c *conn) topicsReady(ctx context.Context, want map[string]int) (bool, string) {
	var names []string
	for n := range want {
		names = append(names, n)
	}
	md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
	if err != nil {
		return false, err.Error()
	}
	seen := map[string]bool{}
	for _, t := range md.Topics {
		if t.Error != nil {
			return false, fmt.Sprintf("%s: %v", t.Name, t.Error)
		}
		if len(t.Partitions) < want[t.Name] {
			return false, fmt.Sprintf("%s has %d of %d partitions", t.Name, len(t.Partitions), want[t.Name])
		}
		for _, p := range t.Partitions {
			if p.Error != nil || p.Leader.Host == "" {
				return false, fmt.Sprintf("%s partition %d has no leader", t.Name, p.ID)
			}
		}
		seen[t.Name] = true
	}
	for _, n := range names {
		if !seen[n] {
			return false, n + " is not in the metadata yet"
		}
	}
	return true, ""
}

// partitions returns topic's partition count.
func (c *conn) partitions(ctx context.Context, topic string) (int, error) {
	md, err := c.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	for _, t := range md.Topics {
		if t.Name == topic {
			if t.Error != nil {
				return 0, t.Error
			}
			return len(t.Partitions), nil
		}
	}
	return 0, fmt.Errorf("topic %s not found", topic)
}

// endOffsets returns the offset the next record of every partition of
// topic will get.
func (c *conn) endOffsets(ctx context.Context, topic string) (map[int]int64, error) {
	return c.offsets(ctx, topic, false)
}

// startOffsets returns the first offset every partition of topic still
// holds (retention removes records below it).
func (c *conn) startOffsets(ctx context.Context, topic string) (map[int]int64, error) {
	return c.offsets(ctx, topic, true)
}

func (c *conn) offsets(ctx context.Context, topic string, first bool) (out map[int]int64, err error) {
	err = c.again(ctx, func(ctx context.Context) (err error) {
		out, err = c.offsetsOnce(ctx, topic, first)
		return err
	})
	return out, err
}

func (c *conn) offsetsOnce(ctx context.Context, topic string, first bool) (map[int]int64, error) {
	n, err := c.partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range n {
		o := kafka.LastOffsetOf(p)
		if first {
			o = kafka.FirstOffsetOf(p)
		}
		req.Topics[topic] = append(req.Topics[topic], o)
	}
	res, err := c.client.ListOffsets(ctx, req)
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for _, po := range res.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("%s partition %d: %w", topic, po.Partition, po.Error)
		}
		if first {
			out[po.Partition] = po.FirstOffset
		} else {
			out[po.Partition] = po.LastOffset
		}
	}
	return out, nil
}

// produce writes msgs, each acknowledged by every in-sync replica. A
// retriable failure — a topic the writer does not see yet (created moments
// ago), a partition without a leader (a broker restarting), a cluster out
// of reach — is retried with backoff (100ms, doubling to 2s) until the
// write has failed for Queue.RetryFor, or the watch says the cluster has
// been unreachable that long. The writer's own retries may write a record
// twice: every reader here treats a repeated record as the first (a unit
// done twice, a report counted once).
func (c *conn) produce(ctx context.Context, msgs ...kafka.Message) error {
	var failing time.Time
	delay := 100 * time.Millisecond
	// A write in flight when the watch gives up is abandoned: the
	// writer's own retries against a silent network would outlast it.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.watch.Gone():
			cancel()
		case <-wctx.Done():
		}
	}()
	for {
		err := c.w.WriteMessages(wctx, msgs...)
		if err == nil {
			return nil
		}
		if gone := c.watch.Err(); gone != nil {
			return gone
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retriable(err) {
			return fmt.Errorf("kafka: %w", err)
		}
		if gone := c.watch.Err(); gone != nil {
			return gone
		}
		if failing.IsZero() {
			failing = time.Now()
		} else if d := time.Since(failing); d > c.watch.Limit() {
			return fmt.Errorf("kafka: writes failed for %s: %w (--retry-for sets how long to retry)", d.Round(time.Second), err)
		}
		c.retries.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.watch.Gone():
			return c.watch.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// again runs op until it succeeds, with backoff (100ms, doubling to 2s),
// for as long as the watch does not say the cluster has been out of reach
// for longer than Queue.RetryFor: for the coordinator's requests (offsets,
// partitions), which a broker restarting or a network cut fails.
func (c *conn) again(ctx context.Context, op func(context.Context) error) error {
	delay := 100 * time.Millisecond
	for {
		err := op(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if gone := c.watch.Err(); gone != nil {
			return fmt.Errorf("%w (last: %v)", gone, err)
		}
		c.retries.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.watch.Gone():
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// retriable reports errors worth another attempt.
func retriable(err error) bool {
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil && !retriable(e) {
				return false
			}
		}
		return true
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		return ke.Temporary() || errors.Is(err, kafka.UnknownTopicOrPartition) || errors.Is(err, kafka.LeaderNotAvailable) ||
			errors.Is(err, kafka.NotLeaderForPartition) || errors.Is(err, kafka.NotEnoughReplicas)
	}
	return true // network errors: the broker may be back
}

// seqHeader carries a unit's position in its sweep: the balancer sends a
// unit to partition seq mod the partition count, so a sweep's units
// spread evenly and a unit sent again (a retry) goes where it was.
const seqHeader = "forklab-seq"

// balancer places unit records by their seqHeader and every other record
// by its key (murmur2, as Kafka's default partitioner).
type balancer struct{}

// Balance implements kafka.Balancer.
func (balancer) Balance(m kafka.Message, partitions ...int) int {
	for _, h := range m.Headers {
		if h.Key == seqHeader {
			if seq, err := strconv.ParseUint(string(h.Value), 10, 64); err == nil {
				return partitions[seq%uint64(len(partitions))]
			}
		}
	}
	return kafka.Murmur2Balancer{}.Balance(m, partitions...)
}

// TopicReplicas returns the replica count of every partition of topic.
func TopicReplicas(ctx context.Context, brokers []string, topic string) (map[int]int, error) {
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	out := map[int]int{}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, t.Error
		}
		for _, p := range t.Partitions {
			out[p.ID] = len(p.Replicas)
		}
	}
	return out, nil
}
