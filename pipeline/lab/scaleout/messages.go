package scaleout

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/segmentio/kafka-go"
)

// MessageVersion is the version of the records on a queue's topics (the
// "v" field). A worker refuses a record of another version.
const MessageVersion = 1

// UnitMsg is a record of the units topic: one unit of work, with
// everything a worker needs to run it — the spec, where to write, the
// limits of its retries. Key: "SWEEP/UNIT" (sweep id, unit id); header
// forklab-seq: the unit's position, which places it on a partition.
type UnitMsg struct {
	V int `json:"v"`
	// Sweep is the sweep's id (the manifest's sweep_id).
	Sweep string `json:"sweep"`
	// Out is the results directory, an absolute path every worker sees
	// (shared storage); the units go to its staging directory.
	Out string `json:"out"`
	// ForklabVersion is the coordinator's forklab version; a worker of
	// another version refuses the unit (files of two versions need not be
	// the same bytes).
	ForklabVersion string `json:"forklab_version"`
	// Spec is the resolved spec.
	Spec sweep.Spec `json:"spec"`
	// Seq is the unit's position in the sweep (sweep.Resolved.UnitSeq);
	// Unit the unit itself.
	Seq  uint64     `json:"seq"`
	Unit sweep.Unit `json:"unit"`
	// Failures counts the failed attempts at the unit when this record
	// was written: 0 when the coordinator published it, more for a retry
	// put back at the end of its partition.
	Failures int `json:"failures"`
	// MaxAttempts is how many attempts a unit gets before it is written
	// as error rows (a poison unit).
	MaxAttempts int `json:"max_attempts"`
	// LeaseMS is how long, in milliseconds, an attempt whose worker stopped
	// heartbeating counts as still running; after it, as failed.
	LeaseMS int64 `json:"lease_ms"`
}

// Lease is the attempt lease as a duration.
func (m UnitMsg) Lease() time.Duration { return time.Duration(m.LeaseMS) * time.Millisecond }

// Report kinds.
const (
	// KindPublished: the coordinator has published every unit (Units).
	KindPublished = "published"
	// KindStarted: a worker started an attempt at a unit.
	KindStarted = "started"
	// KindProgress: seeds an attempt has finished so far (Seeds).
	KindProgress = "progress"
	// KindDone: a unit is finished: its files and ledger entry are in
	// place (Poison: as error rows after its last attempt failed).
	KindDone = "done"
	// KindFailed: an attempt failed (Error); the unit goes back to the
	// end of its partition, or, at the limit, is written as error rows.
	KindFailed = "failed"
	// KindFinalized: the coordinator published the results directory.
	KindFinalized = "finalized"
)

// Report is a record of the results topic. Key: the sweep id.
type Report struct {
	V     int    `json:"v"`
	Kind  string `json:"kind"`
	Sweep string `json:"sweep"`
	// Worker names the worker (host-pid-member) or "coordinator".
	Worker string    `json:"worker"`
	Time   time.Time `json:"time"`
	// Seq and Unit name the unit (started, progress, done, failed).
	Seq  uint64     `json:"seq,omitempty"`
	Unit sweep.Unit `json:"unit,omitzero"`
	// Attempt is the attempt's number, from 1.
	Attempt int `json:"attempt,omitempty"`
	// Seeds: done, the unit's seeds; progress, the seeds finished so far.
	Seeds uint64 `json:"seeds,omitempty"`
	// Errors counts a finished unit's error pairs.
	Errors int64 `json:"errors,omitempty"`
	// Bytes is the size of a finished unit's files.
	Bytes int64 `json:"bytes,omitempty"`
	// Seconds is how long the attempt took.
	Seconds float64 `json:"seconds,omitempty"`
	// Poison marks a unit written as error rows after its last attempt.
	Poison bool `json:"poison,omitempty"`
	// Again marks a done report of a unit found finished already (a
	// redelivered record).
	Again bool `json:"again,omitempty"`
	// Error says why an attempt failed, or a poison unit's attempts.
	Error string `json:"error,omitempty"`
	// Units is the sweep's unit count (published).
	Units uint64 `json:"units,omitempty"`
}

func unitKey(sweepID string, u sweep.Unit) []byte { return []byte(sweepID + "/" + u.ID()) }

// record encodes m as its Kafka record.
func (m UnitMsg) record(topic string) (kafka.Message, error) {
	m.V = MessageVersion
	b, err := json.Marshal(m)
	if err != nil {
		return kafka.Message{}, err
	}
	return kafka.Message{Topic: topic, Key: unitKey(m.Sweep, m.Unit), Value: b,
		Headers: []kafka.Header{{Key: seqHeader, Value: []byte(strconv.FormatUint(m.Seq, 10))}}}, nil
}

// record encodes r as its Kafka record.
func (r Report) record(topic string) kafka.Message {
	r.V = MessageVersion
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	b, _ := json.Marshal(r) // plain fields: cannot fail
	return kafka.Message{Topic: topic, Key: []byte(r.Sweep), Value: b}
}

// decodeUnit decodes a units topic record.
func decodeUnit(b []byte) (UnitMsg, error) {
	var m UnitMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("malformed unit record: %w", err)
	}
	if m.V != MessageVersion {
		return m, fmt.Errorf("unit record of version %d; this forklab reads version %d", m.V, MessageVersion)
	}
	if m.Sweep == "" || m.Out == "" || m.MaxAttempts < 1 || m.LeaseMS <= 0 {
		return m, fmt.Errorf("unit record lacks its sweep, output, attempt limit or lease")
	}
	return m, nil
}

// decodeReport decodes a results topic record.
func decodeReport(b []byte) (Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("malformed report: %w", err)
	}
	if r.V != MessageVersion {
		return r, fmt.Errorf("report of version %d; this forklab reads version %d", r.V, MessageVersion)
	}
	return r, nil
}
