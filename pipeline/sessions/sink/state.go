package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/sessions/agent"
	"github.com/forklab/forklab/stream/kafkalog"
)

// stateVersion is the layout of the state file.
const stateVersion = 1

// state is one partition's committed progress: the file
// OUT/sink/_state/TOPIC+PARTITION.json.
type state struct {
	Version   int    `json:"version"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Prefix    string `json:"prefix"`
	// Next is the committed offset: every record below it is in files.
	Next int64 `json:"next_offset"`
	// Files and Events count what the sink has written, all runs together.
	Files  int64 `json:"files"`
	Events int64 `json:"events"`
	// Gaps are every gap found so far.
	Gaps []Gap `json:"gaps"`
	// Folds are the selected streams' agent.EventFold, by generation.
	Folds []foldState `json:"folds"`
	// Replay is the partition's kafkalog.Replay (MarshalBinary; base64 in
	// the JSON).
	Replay    []byte    `json:"replay"`
	Committed time.Time `json:"committed"`
}

type foldState struct {
	Stream string `json:"stream"`
	Gen    int64  `json:"gen"`
	agent.EventFold
}

// statePath is where partition part's state lives.
func statePath(root, topic string, part int32) string {
	return filepath.Join(root, StateDir, fmt.Sprintf("%s+%d.json", topic, part))
}

// loadState reads partition part's state; a missing file is the state of
// a sink that never committed (offset 0, empty replay).
func loadState(root, topic string, part int32, prefix string) (*state, *kafkalog.Replay, map[kafkalog.StreamRef]*agent.EventFold, error) {
	path := statePath(root, topic, part)
	folds := map[kafkalog.StreamRef]*agent.EventFold{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &state{Version: stateVersion, Topic: topic, Partition: part, Prefix: prefix}, kafkalog.NewReplay(part), folds, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read sink state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, nil, nil, fmt.Errorf("sink state %s: %w", path, err)
	}
	if st.Version != stateVersion || st.Topic != topic || st.Partition != part {
		return nil, nil, nil, fmt.Errorf("sink state %s: version %d of %s partition %d, want version %d of %s partition %d",
			path, st.Version, st.Topic, st.Partition, stateVersion, topic, part)
	}
	if st.Prefix != prefix {
		return nil, nil, nil, fmt.Errorf("%w: %s holds the streams under --prefix %q; a sink directory keeps one selection: use another --out for --prefix %q",
			ErrUsage, filepath.Dir(root), st.Prefix, prefix)
	}
	rp, err := kafkalog.UnmarshalReplay(st.Replay)
	if errors.Is(err, kafkalog.ErrReplayVersion) {
		return nil, nil, nil, fmt.Errorf("sink state %s was written by an earlier forklab, whose fold of the log's records differs (%v): sink into a new --out", path, err)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sink state %s: %w", path, err)
	}
	for _, f := range st.Folds {
		ef := f.EventFold
		folds[kafkalog.StreamRef{Name: f.Stream, Gen: f.Gen}] = &ef
	}
	st.Folds = nil
	return &st, rp, folds, nil
}

// save commits st with rp and folds: temporary file, fsync, rename, fsync of
// the state directory.
func (st *state) save(root string, rp *kafkalog.Replay, folds map[kafkalog.StreamRef]*agent.EventFold) error {
	enc, err := rp.MarshalBinary()
	if err != nil {
		return err
	}
	out := *st
	out.Replay = enc
	out.Committed = time.Now().UTC()
	out.Folds = make([]foldState, 0, len(folds))
	for ref, f := range folds {
		out.Folds = append(out.Folds, foldState{Stream: ref.Name, Gen: ref.Gen, EventFold: *f})
	}
	sort.Slice(out.Folds, func(i, j int) bool {
		a, b := out.Folds[i], out.Folds[j]
		return a.Stream < b.Stream || a.Stream == b.Stream && a.Gen < b.Gen
	})
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	path := statePath(root, st.Topic, st.Partition)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(b, '\n')); err != nil {
		return fmt.Errorf("commit sink state: %w", err)
	}
	if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("commit sink state: %w", err)
	}
	return nil
}
