// Package schemas is the single definition of every table forklab writes:
// one Go struct per table whose parquet tags name the columns. The README
// beside this file names every column, its type, unit and meaning; BI tools
// and ad hoc SQL rely on both, so a change here that renames, retypes or
// removes a column bumps SchemaVersion.
//
// The tables of a sweep, one folder each under the results directory:
//
//	configs/      one row per configuration: world and model parameters
//	tasks/        one row per (config, seed): the task drawn for the seed
//	checkpoints/  one row per (config, seed, fork step): the run at the fork
//	branches/     one row per (config, seed, fork step, arm, replica)
//	pairs/        one row per (config, seed, fork step, treatment arm): the
//	              majority outcome of the arm against the control arm off
//
// The folders are Hive-partitioned: tasks/config_id=0/part-000000.parquet,
// pairs/config_id=0/fork_step=3/part-000000.parquet. The partition columns
// config_id and fork_step live in the path, not in the files, so engines
// prune files by them; the views of queries/views.sql put them back as
// columns and join the configuration's parameters onto tasks and pairs.
//
// Columns prefixed hidden_ hold ground truth the agent cannot see. They are
// recorded for evaluation and are never features.
package schemas

import "time"

// SchemaVersion is the version of the table layout, recorded in every
// manifest. Version 1 is the first layout.
const SchemaVersion = 1

// Tables lists the per-shard table folders of a results directory, in
// write order.
var Tables = []string{"tasks", "checkpoints", "branches", "pairs"}

// ConfigsTable is the folder of the configs table, written once per sweep.
const ConfigsTable = "configs"

// Config is a row of configs: one point of the sweep's parameter grid.
type Config struct {
	ConfigID     int32   `parquet:"config_id"`
	World        string  `parquet:"world"`
	Target       int32   `parquet:"target"`
	BaseBudget   int32   `parquet:"base_budget"`
	SlackValues  []int32 `parquet:"slack_values,list"`
	FreezeValues []int32 `parquet:"freeze_values,list"`
	PStall       float64 `parquet:"p_stall"`
	PObsNoise    float64 `parquet:"p_obs_noise"`
	PRefreshFail float64 `parquet:"p_refresh_fail"`
	Temperature  float64 `parquet:"temperature"`
	NoTool       float64 `parquet:"no_tool"`
}

// Task is a row of tasks: the task a seed draws. Partitioned by config_id.
type Task struct {
	Seed   int64 `parquet:"seed"`
	Slack  int32 `parquet:"slack"`
	Budget int32 `parquet:"budget"`
	// FreezeAt is null when the sensor never sticks.
	FreezeAt *int32 `parquet:"freeze_at,optional"`
}

// Features are the pre-decision features of a checkpoint, as columns.
type Features struct {
	SameObs    bool  `parquet:"same_obs"`
	RepeatRun  int32 `parquet:"repeat_run"`
	ObsValue   int32 `parquet:"obs_value"`
	StepsUsed  int32 `parquet:"steps_used"`
	BudgetLeft int32 `parquet:"budget_left"`
}

// FeatureNames lists the feature columns, in the order slices report them.
var FeatureNames = []string{"same_obs", "repeat_run", "obs_value", "steps_used", "budget_left"}

// Hidden is the ground truth at a checkpoint, as columns.
type Hidden struct {
	HiddenStuck bool `parquet:"hidden_stuck"`
	HiddenFault bool `parquet:"hidden_fault"`
}

// Checkpoint is a row of checkpoints: a run stopped at a fork step.
// Partitioned by config_id and fork_step.
type Checkpoint struct {
	Seed int64 `parquet:"seed"`
	// Over: the run had already ended (declared or out of budget) before
	// reaching the fork step.
	Over bool `parquet:"over"`
	Features
	Hidden
	HiddenValue int32 `parquet:"hidden_value"`
	// Checkpoint is the checkpoint itself, the JSON that forklab fork
	// --checkpoint reads.
	Checkpoint string `parquet:"checkpoint"`
}

// Branch is a row of branches: one replica of one arm, finished.
// Partitioned by config_id and fork_step.
type Branch struct {
	Seed    int64  `parquet:"seed"`
	Arm     string `parquet:"arm,dict"`
	Replica int32  `parquet:"replica"`
	// Intervened: the arm's intervention (refresh, or the placebo's
	// empty action) was applied at the fork.
	Intervened bool  `parquet:"intervened"`
	Success    bool  `parquet:"success"`
	Declared   bool  `parquet:"declared"`
	FinalValue int32 `parquet:"final_value"`
	Steps      int32 `parquet:"steps"`
}

// Pair is a row of pairs: a treatment arm against the control arm off on
// the same checkpoint, each side decided by majority over its replicas.
// Partitioned by config_id and fork_step.
type Pair struct {
	Seed     int64  `parquet:"seed"`
	Arm      string `parquet:"arm,dict"`
	Replicas int32  `parquet:"replicas"`
	// ControlWins and TreatmentWins count successful replicas.
	ControlWins      int32  `parquet:"control_wins"`
	TreatmentWins    int32  `parquet:"treatment_wins"`
	ControlSuccess   bool   `parquet:"control_success"`
	TreatmentSuccess bool   `parquet:"treatment_success"`
	Label            string `parquet:"label,dict"`
	Quadrant         string `parquet:"quadrant,dict"`
	Features
	Hidden
}

// SessionEvent is a row of events: one event of an agent session on the
// session log, as forklab log export (DIR/events/) and forklab log sink
// (DIR/sink/) write it. The JSON schema of the events themselves is
// session-event.schema.json; the columns below flatten it, nullable where a
// type lacks the field, and add what the stream's events up to this one say
// about the session (its seed from session_start; for a branch its fork
// step, arm and replica from the fork event) so events join with pairs.
type SessionEvent struct {
	Stream string `parquet:"stream,dict"`
	// Index is the event's position in the stream, from 0, incarnation
	// events included.
	Index int32 `parquet:"index"`
	// ReadOffset is an offset to read from to see this event (forklab log
	// read --offset): the start of the read that returned it (log export),
	// or the offset of the record that holds it (log sink).
	ReadOffset string `parquet:"read_offset,dict"`
	Type       string `parquet:"type,dict"`
	Domain     bool   `parquet:"domain"`

	Epoch  *int64  `parquet:"epoch,optional"`
	Turn   *int32  `parquet:"turn,optional"`
	Tool   *string `parquet:"tool,optional,dict"`
	NoTool *bool   `parquet:"no_tool,optional"`
	Action *string `parquet:"action,optional,dict"`
	Obs    *int32  `parquet:"obs,optional"`
	Steps  *int32  `parquet:"steps,optional"`

	Success  *bool  `parquet:"success,optional"`
	Declared *bool  `parquet:"declared,optional"`
	Value    *int32 `parquet:"value,optional"`

	// SessionSeed is the seed of the stream's session_start event, on
	// that event and every later one (null before it); the Branch columns
	// are the fork event's, on it and every later one. A fork's inherited
	// events are its source's and carry no branch.
	SessionSeed    *int64  `parquet:"session_seed,optional"`
	BranchForkStep *int32  `parquet:"branch_fork_step,optional"`
	BranchArm      *string `parquet:"branch_arm,optional,dict"`
	BranchReplica  *int32  `parquet:"branch_replica,optional"`

	// Event is the event's JSON as the log holds it.
	Event string `parquet:"event"`

	// Where the log holds the event, as forklab log sink reads it from
	// Kafka. forklab log export reads through the HTTP API, which does not
	// say, and leaves these null.
	//
	// Generation is the stream generation: 1 for the first stream created
	// under the name, one more each time the name is created again after
	// a delete (its events start again at index 0).
	Generation *int64 `parquet:"generation,optional"`
	// KafkaPartition and KafkaOffset locate the record that holds the
	// event in the data topic (for an event a fork inherits, its source's
	// record; for a record a Writer retry wrote twice, the copy read
	// first). One record can hold several events (a JSON array appended).
	KafkaPartition *int32 `parquet:"kafka_partition,optional"`
	KafkaOffset    *int64 `parquet:"kafka_offset,optional"`
	// AppendedAt is that record's Kafka timestamp: when the log service
	// wrote it, UTC, millisecond precision. The sink partitions its files
	// by its date (event_date).
	AppendedAt *time.Time `parquet:"appended_at,optional,timestamp(millisecond)"`
}
