// Package recorded reads recorded populations: the runs a team already
// has — checkpoints exported to a file, sessions its agents wrote to the
// session log, the threads of an agent's checkpointer — which forklab sweep
// --runs SOURCE forks instead of the runs of a seed range
// (docs/recorded-runs.md).
//
// A Source is opened once (Open) and lists its population: how many runs,
// the size and CRC-32C of what lists them, and, for a file, the fork steps
// its records are at. Every run has a position, from 0, in the order the
// source lists them (a file's order, stream names sorted, the agent's
// order); the sweep cuts positions into units as it cuts seeds, and reads
// each unit's runs with Read as lab.Records, which the world forks
// (lab.RecordRunner). A bad record — a duplicate run_id, a checkpoint of
// another world, a stream that is not a session — is a *lab.RecordError
// naming it (a file's line, a stream); a source that changes while it is
// read is ErrChanged: both are bad input, and the sweep publishes nothing.
//
// Memory: a file is read a unit at a time; while it is listed, forklab
// keeps 8 bytes per run (to find duplicate run ids) and 20 bytes per 64
// runs (where each block of 64 records starts, and its checksum). A log
// prefix's stream names and an agent's run ids and metadata are held
// whole.
package recorded

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strings"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/world"
)

// The formats of a population's source.
const (
	FormatJSONL   = "jsonl"   // a JSON Lines file (.jsonl, .ndjson) of records
	FormatParquet = "parquet" // a Parquet file of records, one per row
	FormatLog     = "log"     // every stream under a prefix of the session log
	FormatAgent   = "agent"   // the runs an external agent lists (capability runs)
)

// AgentSource is the SOURCE naming an agent's own runs: forklab sweep
// --agent CMD --runs agent: lists them with the agent's runs method and
// loads each with load.
const AgentSource = "agent:"

// Listing identifies a population: what kind of source, how many runs,
// and the size in bytes and CRC-32C (Castagnoli, hex) of what lists them —
// a file's bytes; a log prefix's stream names, each followed by a newline;
// an agent's runs, each as the JSON line {"run_id":…,"metadata":…}
// followed by a newline. Two listings that are equal are the same
// population (a --resume, a share or a worker checks it).
type Listing struct {
	Format string
	Runs   uint64
	Bytes  int64
	CRC32C string
	// ForkSteps are the fork steps a file's records are at, ascending;
	// nil for the log and an agent, which are forked at the sweep's.
	ForkSteps []int
	// Metadata: some record carries metadata (a file's other keys).
	Metadata bool
}

// Source is an opened population.
type Source interface {
	// Listing returns what Open found.
	Listing() Listing
	// Read returns the records at positions [lo, hi), in order, and done,
	// which releases what the reading holds. Reads of separate ranges may
	// run at once. A record the source cannot give is a *lab.RecordError;
	// a source that changed since it was listed is ErrChanged.
	Read(ctx context.Context, lo, hi uint64) (next lab.Records, done func(), err error)
	// Check reports a source that changed since it was listed, as far as
	// it can tell without reading it all again (a file's size and
	// modification time); the sweep checks it before it publishes.
	Check() error
	// Close releases the source.
	Close() error
}

// Options say how to open a source.
type Options struct {
	// Decl is the sweep's world.
	Decl world.Declaration
	// Builtin: the world is built in, and a file's checkpoints are its
	// own: while the file is listed each is peeked at (world, version,
	// fork step) so that a checkpoint of another world is named before
	// anything runs.
	Builtin bool
	// ForkAt are the fork steps the sweep was given (--fork-at, a spec's
	// fork_at), or nil: a file's records are then at their own steps. A
	// record at a step not among them is refused; a record without a fork
	// step (an agent's checkpoint, which does not say) takes the one step
	// given.
	ForkAt []int
	// NeedFeatures: a file's records must carry their features (an
	// agent that does not declare inspect cannot compute them).
	NeedFeatures bool
	// Token is the bearer token of a session-log source.
	Token string
	// Agent lists an agent's runs (source AgentSource).
	Agent Lister
}

// ErrChanged reports a source that changed while the sweep read it: a
// file written to, a stream deleted. The sweep stops before publishing; a
// population is read as it was when it was listed, or not at all.
var ErrChanged = errors.New("changed while the sweep read it")

// ErrUnreachable reports a session log that did not answer: a runtime
// failure, not bad input (docs/exit-status.md).
var ErrUnreachable = errors.New("the session log did not answer")

// Open opens the population at source: a file (.jsonl, .ndjson or
// .parquet), a session-log URL naming a stream prefix
// (http://HOST:PORT/v1/stream/PREFIX), or AgentSource. It lists the
// population, checking every record as far as it can without forking it:
// errors name the record.
func Open(ctx context.Context, source string, o Options) (Source, error) {
	switch {
	case source == AgentSource:
		if o.Agent == nil {
			return nil, fmt.Errorf("--runs %s lists an external agent's runs: give the agent with --agent CMD", AgentSource)
		}
		return openAgent(ctx, o)
	case strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://"):
		return openLog(ctx, source, o)
	}
	switch strings.ToLower(filepath.Ext(source)) {
	case ".jsonl", ".ndjson":
		return openJSONL(source, o)
	case ".parquet":
		return openParquet(ctx, source, o)
	}
	return nil, fmt.Errorf("runs %s: want a .jsonl, .ndjson or .parquet file, a session-log URL (http://HOST:PORT/v1/stream/PREFIX) or %s", source, AgentSource)
}

// castagnoli is the CRC-32C table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crcText(c uint32) string { return fmt.Sprintf("%08x", c) }
