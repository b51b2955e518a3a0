// Package schemas is the single definition of every table forklab writes:
// each table's fixed columns (Configs, Params, Tasks, Checkpoints,
// Branches, Pairs), and the rule that adds the columns a world's
// declaration names (its task fields, features and hidden truth, typed by
// their declared kind). The README beside this file names every column, its
// type, unit and meaning; BI tools and ad hoc SQL rely on both, so a change
// here that renames, retypes or removes a column bumps SchemaVersion.
//
// The tables of a sweep, one folder each under the results directory:
//
//	configs/      one row per configuration: world, parameters, model
//	params/       one row per configuration and world parameter
//	tasks/        one row per (config, seed): the task drawn for the seed
//	checkpoints/  one row per (config, seed, fork step): the run at the fork
//	branches/     one row per (config, seed, fork step, arm, replica), with
//	              the branch's transcript when one was kept
//	pairs/        one row per (config, seed, fork step, treatment arm): the
//	              majority outcome of the arm against the control arm off
//
// The folders are Hive-partitioned: tasks/config_id=0/part-000000.parquet,
// pairs/config_id=0/fork_step=3/part-000000.parquet. The partition columns
// config_id and fork_step live in the path, not in the files, so engines
// prune files by them; the views (package queries) put them back as columns
// and join the configuration's parameters onto pairs.
//
// Columns prefixed hidden_ hold ground truth the agent cannot see. They are
// recorded for evaluation and are never features.
package schemas

import (
	"time"

	"github.com/forklab/forklab/pipeline/world"
)

// SchemaVersion is the version of the table layout, recorded in every
// manifest. Version 1 was the counter world's fixed columns; version 2 is
// world-agnostic: every table's columns are the fixed ones below plus the
// columns a world's declaration (pipeline/world.Declaration) names, and
// rows carry a status ('ok' or 'error') so a failed run is a row, never a
// label. Version 3 keys rows by run (run_id on tasks, checkpoints,
// branches and pairs, seed nullable: a recorded run may have none) and adds
// branches.noise_key (issue 22), the graded outcome (branches.score;
// pairs.score_control, score_treated, score_diff), branches.transcript and
// the other columns schemas/README.md lists under "v3".
const SchemaVersion = 3

// OldestReadable is the oldest schema version this forklab reads: a
// version 2 directory is read as version 3 (version 3 only added columns,
// which the views give as NULL over older files; its files have no run_id,
// and the views give the decimal seed, as for any seed population).
const OldestReadable = 2

// Tables lists the per-shard table folders of a results directory, in
// write order.
var Tables = []string{"tasks", "checkpoints", "branches", "pairs"}

// ConfigsTable and ParamsTable are the folders of the tables written once
// per sweep.
const (
	ConfigsTable = "configs"
	ParamsTable  = "params"
)

// Type is a column's SQL type, as DuckDB reads it back.
type Type string

// The column types.
const (
	BigInt  Type = "BIGINT"
	Integer Type = "INTEGER"
	Boolean Type = "BOOLEAN"
	Double  Type = "DOUBLE"
	Varchar Type = "VARCHAR"
)

// Column is one column of a table.
type Column struct {
	Name string
	Type Type
	// Nullable: the column may hold NULL (on error rows at least).
	Nullable bool
	// Optional: NULL is an ordinary value of the column (a declared
	// nullable field), not only an error row's.
	Optional bool
	// Omittable: a file in which the column is all NULL leaves it out;
	// readers see NULL (the views read with union_by_name).
	Omittable bool
	// Dict: a VARCHAR with few distinct values, dictionary-encoded.
	Dict bool
	// Declared: the column comes from the world's declaration.
	Declared    bool
	Description string
}

// The status values of tasks, checkpoints, branches and pairs.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// HiddenPrefix prefixes the column of every hidden truth.
const HiddenPrefix = "hidden_"

func declared(fs []world.Field, prefix string, nullable bool) []Column {
	cols := make([]Column, len(fs))
	for i, f := range fs {
		cols[i] = Column{Name: prefix + f.Name, Type: TypeOf(f.Kind), Nullable: nullable || f.Nullable, Optional: f.Nullable,
			Dict: f.Kind == world.Enum, Declared: true, Description: f.Description}
	}
	return cols
}

// TypeOf is the column type of a declared kind.
func TypeOf(k world.Kind) Type {
	switch k {
	case world.Bool:
		return Boolean
	case world.Int:
		return BigInt
	case world.Float:
		return Double
	}
	return Varchar
}

// seed is the seed column of tasks, checkpoints, branches and pairs:
// required in a seed population's files, NULL for a recorded run without
// one (left out of a file where every run has none).
var seed = Column{Name: "seed", Type: BigInt, Nullable: true, Omittable: true,
	Description: "the task seed; NULL for a recorded run that has none"}

// RunID is the run_id column of tasks, checkpoints, branches and pairs
// (schema version 3): a recorded run's id (its record's run_id, its
// session's stream, its agent's id). A seed population's files leave it
// out: the views give the decimal seed there (schemas/README.md, "Rows
// keyed by run").
var RunID = Column{Name: "run_id", Type: Varchar, Nullable: true, Omittable: true,
	Description: "the run: a recorded run's id; the decimal seed for a seed population (the views fill it in; the files leave it out)"}

// Metadata is the tasks table's metadata column: what a recorded run's
// source says about it beyond its checkpoint, as JSON.
var Metadata = Column{Name: "metadata", Type: Varchar, Nullable: true, Omittable: true,
	Description: "what a recorded run's source says about it, as JSON (a record's other keys, an agent's metadata); NULL for none"}

var status = []Column{
	{Name: "status", Type: Varchar, Dict: true, Description: "'ok', or 'error' when the run, branch or pair failed (errors are rows, never labels)"},
	{Name: "error", Type: Varchar, Nullable: true, Omittable: true, Description: "what failed, when status is 'error'"},
}

// costColumns returns the cost columns with prefix ("cost_", "extra_").
func costColumns(prefix string, typ func(string) Type, what string) []Column {
	cols := make([]Column, len(world.CostFields))
	for i, f := range world.CostFields {
		cols[i] = Column{Name: prefix + f, Type: typ(f), Nullable: true, Omittable: true, Description: what + " in " + f + " (NULL when the world does not report " + f + ")"}
	}
	return cols
}

func costType(f string) Type {
	if f == world.CostSteps || f == world.CostTokens {
		return BigInt
	}
	return Double
}

// Configs is the configs table: one row per configuration, one point of
// the spec's parameter grid.
func Configs() []Column {
	return []Column{
		{Name: "config_id", Type: Integer, Description: "the configuration, from 0"},
		{Name: "world", Type: Varchar, Dict: true, Description: "the world's name"},
		{Name: "world_version", Type: Varchar, Dict: true, Description: "the world's version"},
		{Name: "params", Type: Varchar, Description: "the configuration's world parameters, a JSON object"},
		{Name: "temperature", Type: Double, Description: "the fake model's chance a turn departs from the greedy choice"},
		{Name: "no_tool", Type: Double, Description: "the share of departing turns that call no tool"},
	}
}

// Params is the params table, long: one row per configuration and world
// parameter.
func Params() []Column {
	return []Column{
		{Name: "config_id", Type: Integer, Description: "the configuration"},
		{Name: "param", Type: Varchar, Dict: true, Description: "the parameter's name"},
		{Name: "type", Type: Varchar, Dict: true, Description: "its type: bool, int, float, enum, int_list, float_list"},
		{Name: "value_num", Type: Double, Nullable: true, Optional: true, Description: "its value as a number (bool 0/1); NULL for enums and lists"},
		{Name: "value_text", Type: Varchar, Description: "its canonical text: true, 6, 0.2, fast, [0,0,1,2]"},
	}
}

// Tasks is the tasks table of world d: one row per (config, seed).
// Partitioned by config_id.
func Tasks(d world.Declaration) []Column {
	cols := []Column{seed}
	cols = append(cols, status...)
	cols = append(cols, declared(d.Task, "", true)...)
	return append(cols, RunID, Metadata)
}

// Checkpoints is the checkpoints table of world d: one row per (config,
// seed, fork step), the run stopped at the fork. Partitioned by config_id
// and fork_step.
func Checkpoints(d world.Declaration) []Column {
	cols := []Column{seed}
	cols = append(cols, status...)
	cols = append(cols, Column{Name: "over", Type: Boolean, Nullable: true, Description: "the run had ended before reaching the fork step"})
	cols = append(cols, declared(d.Features, "", true)...)
	cols = append(cols, declared(d.Hidden, HiddenPrefix, true)...)
	cols = append(cols, costColumns("cost_", costType, "what reaching the fork cost")...)
	cols = append(cols, Column{Name: "checkpoint", Type: Varchar, Nullable: true, Description: "the checkpoint's JSON, what forklab fork --checkpoint reads"})
	return append(cols, RunID)
}

// Branches is the branches table: one row per (config, seed, fork step,
// arm, replica), a finished branch. Partitioned by config_id and
// fork_step.
func Branches(d world.Declaration) []Column {
	cols := []Column{
		seed,
		{Name: "arm", Type: Varchar, Dict: true, Description: "off, on, placebo, aa or policy"},
		{Name: "replica", Type: Integer, Description: "the replica, from 0"},
		{Name: "noise_key", Type: Varchar, Nullable: true, Description: "16 lowercase hex digits: the key the branch's noise was drawn from (fork.BranchKey; an agent is sent it as noise_key); NULL when the checkpoint failed and no branch was drawn"},
	}
	cols = append(cols, status...)
	cols = append(cols,
		Column{Name: "intervened", Type: Boolean, Nullable: true, Description: "the arm's intervention was applied at the fork"},
		Column{Name: "success", Type: Boolean, Nullable: true, Description: "the branch met the task's goal"},
		Column{Name: "score", Type: Double, Nullable: true, Omittable: true, Description: "the branch's graded outcome, within the declared score's range (NULL for a pass/fail world)"})
	cols = append(cols, costColumns("cost_", costType, "what the branch cost from the fork to its end, the intervention included,")...)
	return append(cols,
		Column{Name: "details", Type: Varchar, Nullable: true, Omittable: true, Description: "outcome details an agent reports, JSON (NULL for built-in worlds)"},
		Column{Name: TranscriptColumn, Type: Varchar, Nullable: true, Omittable: true, Description: "what the branch did after the fork, step by step: a JSON array of step objects (docs/agent-protocol.md, Transcripts); an agent's when it sends one, a built-in world's when the sweep ran with --transcripts, else NULL (forklab show replays the branch)"},
		RunID)
}

// TranscriptColumn is the branches table's column of transcripts. It is
// omittable: the files of a sweep that kept no transcript leave it out, so
// transcripts cost nothing when they are off, and a reader that does not
// name it (every query but forklab show's) never reads their bytes.
const TranscriptColumn = "transcript"

// Pairs is the pairs table of world d: one row per (config, seed, fork
// step, treatment arm), the arm against the control off on the same
// checkpoint, each side decided by majority over its replicas.
// Partitioned by config_id and fork_step.
func Pairs(d world.Declaration) []Column {
	cols := []Column{
		seed,
		{Name: "arm", Type: Varchar, Dict: true, Description: "the treatment arm"},
		{Name: "replicas", Type: Integer, Description: "replicas per side"},
	}
	cols = append(cols, status...)
	cols = append(cols,
		Column{Name: "control_wins", Type: Integer, Nullable: true, Description: "successful replicas of off"},
		Column{Name: "treatment_wins", Type: Integer, Nullable: true, Description: "successful replicas of the arm"},
		Column{Name: "control_success", Type: Boolean, Nullable: true, Description: "off succeeded by strict majority"},
		Column{Name: "treatment_success", Type: Boolean, Nullable: true, Description: "the arm succeeded by strict majority"},
		Column{Name: "label", Type: Varchar, Nullable: true, Dict: true, Description: "rescued, harmed or unchanged; NULL on error"},
		Column{Name: "quadrant", Type: Varchar, Nullable: true, Dict: true, Description: "persuadable, sleeping_dog, sure_thing or lost_cause; NULL on error"},
		Column{Name: "fault", Type: Boolean, Nullable: true, Description: "the declared fault flag's value (NULL when the world declares none)"},
		Column{Name: "score_control", Type: Double, Nullable: true, Omittable: true, Description: "off's mean score over its replicas (NULL for a pass/fail world, and on error)"},
		Column{Name: "score_treated", Type: Double, Nullable: true, Omittable: true, Description: "the arm's mean score over its replicas"},
		Column{Name: "score_diff", Type: Double, Nullable: true, Omittable: true, Description: "score_treated - score_control, rounded to 12 significant digits of the score's range (world.ScoreSpec.RoundDiff) so that equal differences are equal"})
	cols = append(cols, declared(d.Features, "", true)...)
	cols = append(cols, declared(d.Hidden, HiddenPrefix, true)...)
	cols = append(cols, costColumns("extra_", func(string) Type { return Double }, "the arm's mean branch cost minus off's,")...)
	return append(cols, RunID)
}

// TableColumns returns the columns of a per-shard table ("tasks",
// "checkpoints", "branches", "pairs") of world d.
func TableColumns(table string, d world.Declaration) []Column {
	switch table {
	case "tasks":
		return Tasks(d)
	case "checkpoints":
		return Checkpoints(d)
	case "branches":
		return Branches(d)
	case "pairs":
		return Pairs(d)
	}
	return nil
}

// SessionEvent is a row of events: one event of an agent session on the
// session log, as forklab log export (DIR/events/) and forklab log sink
// (DIR/sink/) write it, for any world. The JSON schema of the events
// themselves is session-event.schema.json (layout version 2); the columns
// below flatten it, nullable where a type lacks the field, and add what the
// stream's events up to this one say about the session (its seed from
// session_start; for a branch its fork step, arm and replica from the fork
// event) so events join with pairs. A world's own data (its parameters, its
// observations) stays JSON: obs, and event for the rest.
type SessionEvent struct {
	Stream string `parquet:"stream,dict"`
	// Index is the event's position in the stream, from 0, incarnation
	// events included.
	Index int32 `parquet:"index"`
	// ReadOffset is an offset to read from to see this event (forklab log
	// read --offset): the start of the read that returned it (log export),
	// or the offset the log issued right before the record that holds it,
	// so that a read from it starts with that record (log sink; Zero, the
	// beginning, for a stream's first record). Where retention removed
	// what lay before the event (a stream whose first records are gone),
	// it is the earliest offset the log still serves (export: the
	// Forklab-Earliest-Offset of the 410 from the beginning; sink: the
	// partition's log start offset), never one a read refuses with 410.
	ReadOffset string `parquet:"read_offset,dict"`
	Type       string `parquet:"type,dict"`
	Domain     bool   `parquet:"domain"`

	Epoch *int64 `parquet:"epoch,optional"`
	// Turn is the step a model turn, tool result or recovery uses.
	Turn *int32 `parquet:"turn,optional"`
	// Tool is the action a model turn calls or a tool result reports, by
	// its name in the world's declaration; NoTool marks a model turn that
	// called no tool; Action is a recovery's (or the fork event's
	// recovery's) action.
	Tool   *string `parquet:"tool,optional,dict"`
	NoTool *bool   `parquet:"no_tool,optional"`
	Action *string `parquet:"action,optional,dict"`
	// Obs is what the agent sees after a tool result or recovery, or at
	// the outcome: the world's observation as canonical JSON (DuckDB:
	// obs::JSON ->> 'field'). Steps is the run's step count then.
	Obs   *string `parquet:"obs,optional"`
	Steps *int32  `parquet:"steps,optional"`

	// Success is the outcome's verdict.
	Success *bool `parquet:"success,optional"`

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
	// record; for a record Kafka holds twice, the copy read first). One record can hold several events (a JSON array appended).
	KafkaPartition *int32 `parquet:"kafka_partition,optional"`
	KafkaOffset    *int64 `parquet:"kafka_offset,optional"`
	// AppendedAt is that record's Kafka timestamp: when the log service
	// wrote it, UTC, millisecond precision. The sink partitions its files
	// by its date (event_date).
	AppendedAt *time.Time `parquet:"appended_at,optional,timestamp(millisecond)"`
}
