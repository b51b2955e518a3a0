package sweep

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/schemas"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

func readRows[T any](t *testing.T, pattern string) []T {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: %v, %d files", pattern, err, len(files))
	}
	slices.Sort(files)
	var rows []T
	for _, f := range files {
		r, err := parquet.ReadFile[T](f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rows = append(rows, r...)
	}
	return rows
}

// The tables read back, through another reader than the writer's, hold
// what the generic fork.Lab computes: the tasks are the world's draws, and
// for each checkpoint's JSON, the
// checkpoint bytes are Checkpoint.Encode's, its feature columns are the
// decoded state's, and every branch row is the reference Lab's branch of
// the decoded state. A noisy, imperfect spec with two fork steps, every arm
// and three replicas, over more than one shard.
func TestTablesReadBackAsForkLabComputes(t *testing.T) {
	spec := DefaultSpec()
	spec.ForkAt = []int{2, 4}
	spec.Arms = fork.Arms[:4]
	spec.Replicas = 3
	spec.Params.PStall, spec.Params.PObsNoise, spec.Params.PRefreshFail = 0.1, 0.05, 0.2
	spec.Model.Temperature = 0.2
	spec.Seeds = Range{7, 7 + spec.ShardSeeds() + 300}
	out := runSweep(t, spec, 2)
	ref := fork.Lab[counter.State]{World: counter.World{P: spec.Params}, Model: spec.Model}
	tasks := readRows[schemas.Task](t, filepath.Join(out, "tasks", "config_id=0", "*.parquet"))
	if len(tasks) != int(spec.Seeds.Len()) {
		t.Fatalf("%d tasks", len(tasks))
	}
	nulls := 0
	for i, task := range tasks {
		s := ref.World.Start(spec.Seeds.Start + uint64(i))
		freeze := int32(0)
		if task.FreezeAt != nil {
			freeze = *task.FreezeAt
		} else {
			nulls++
		}
		if task.Seed != int64(s.Seed) || task.Budget != s.Budget || task.Slack != s.Budget-int32(spec.Params.BaseBudget) ||
			freeze != s.FreezeAt || (task.FreezeAt != nil && freeze == 0) {
			t.Fatalf("task row %+v (freeze_at %d), start state %+v", task, freeze, s)
		}
	}
	if nulls == 0 || nulls == len(tasks) {
		t.Fatalf("%d of %d tasks without a sensor fault", nulls, len(tasks))
	}
	for _, f := range spec.ForkAt {
		files := func(table string) string {
			return filepath.Join(out, table, "config_id=0", fmt.Sprintf("fork_step=%d", f), "*.parquet")
		}
		cps := readRows[schemas.Checkpoint](t, files("checkpoints"))
		brs := readRows[schemas.Branch](t, files("branches"))
		if len(cps) != int(spec.Seeds.Len()) || len(brs) != len(cps)*len(spec.Arms)*spec.Replicas {
			t.Fatalf("fork %d: %d checkpoints, %d branches", f, len(cps), len(brs))
		}
		for i, row := range cps {
			c, err := fork.DecodeCheckpoint[counter.State, counter.Params]([]byte(row.Checkpoint), counter.Name)
			if err != nil {
				t.Fatalf("seed %d: %v", row.Seed, err)
			}
			if b, _ := c.Encode(); string(b) != row.Checkpoint || c.State.Seed != uint64(row.Seed) || c.ForkStep != f {
				t.Fatalf("seed %d fork %d: checkpoint does not round-trip:\n%s\n%s", row.Seed, f, row.Checkpoint, b)
			}
			s := c.State
			feat := ref.World.Features(s)
			if row.SameObs != feat.SameObs || row.RepeatRun != int32(feat.RepeatRun) || row.ObsValue != int32(feat.ObsValue) ||
				row.StepsUsed != int32(feat.StepsUsed) || row.BudgetLeft != int32(feat.BudgetLeft) ||
				row.HiddenStuck != s.Frozen || row.HiddenValue != s.V || row.Over != ref.World.Observe(s).Over {
				t.Fatalf("seed %d fork %d: row %+v, state %+v", row.Seed, f, row, s)
			}
			for j, b := range brs[i*len(spec.Arms)*spec.Replicas : (i+1)*len(spec.Arms)*spec.Replicas] {
				arm, r := fork.Arm(b.Arm), int(b.Replica)
				if b.Seed != row.Seed || arm != spec.Arms[j/spec.Replicas] || r != j%spec.Replicas {
					t.Fatalf("seed %d: branch row %d is %+v", row.Seed, j, b)
				}
				final, ok, iv := ref.Branch(s, uint64(row.Seed), f, arm, r, false)
				if b.Success != ok || b.Intervened != iv || b.Declared != final.Declared || b.FinalValue != final.V || b.Steps != final.Steps {
					t.Fatalf("seed %d fork %d arm %s replica %d: row %+v, fork.Lab %+v %t %t", row.Seed, f, arm, r, b, final, ok, iv)
				}
			}
		}
	}
}

// The writer options do what writerOptions says, in the files: delta
// encodings for the integer columns and the checkpoint JSON, dictionaries
// kept where schemas asks for them, zstd everywhere, min/max statistics for
// the integer columns (engines prune seed ranges with them) and none for
// the string columns.
func TestTableEncodings(t *testing.T) {
	spec := DefaultSpec()
	spec.Seeds = Range{0, 3000}
	out := runSweep(t, spec, 1)
	want := map[string]map[string]string{
		"tasks":       {"seed": "DELTA_BINARY_PACKED", "slack": "DELTA_BINARY_PACKED", "budget": "DELTA_BINARY_PACKED", "freeze_at": "PLAIN"},
		"checkpoints": {"seed": "DELTA_BINARY_PACKED", "over": "PLAIN", "obs_value": "DELTA_BINARY_PACKED", "checkpoint": "DELTA_BYTE_ARRAY"},
		"branches":    {"seed": "DELTA_BINARY_PACKED", "arm": "RLE_DICTIONARY", "steps": "DELTA_BINARY_PACKED"},
		"pairs":       {"seed": "DELTA_BINARY_PACKED", "arm": "RLE_DICTIONARY", "label": "RLE_DICTIONARY", "quadrant": "RLE_DICTIONARY", "budget_left": "DELTA_BINARY_PACKED"},
	}
	for table, cols := range want {
		files, _ := filepath.Glob(filepath.Join(out, table, "config_id=0", "*", "*.parquet"))
		files2, _ := filepath.Glob(filepath.Join(out, table, "config_id=0", "*.parquet"))
		files = append(files, files2...)
		if len(files) != 1 {
			t.Fatalf("%s: %d files", table, len(files))
		}
		f, err := os.Open(files[0])
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		pf, err := parquet.OpenFile(f, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, cc := range pf.Metadata().RowGroups[0].Columns {
			md := cc.MetaData
			name := strings.Join(md.PathInSchema, ".")
			if md.Codec != format.Zstd {
				t.Errorf("%s.%s: codec %v", table, name, md.Codec)
			}
			hasBounds := md.Statistics.MinValue != nil
			if isString := md.Type == format.ByteArray; hasBounds == isString {
				t.Errorf("%s.%s: min/max statistics %t", table, name, hasBounds)
			}
			enc, ok := cols[name]
			if !ok {
				continue
			}
			seen++
			var encs []string
			for _, e := range md.Encoding {
				encs = append(encs, e.String())
			}
			if !slices.Contains(encs, enc) {
				t.Errorf("%s.%s: encodings %v, want %s", table, name, encs, enc)
			}
		}
		f.Close()
		if seen != len(cols) {
			t.Errorf("%s: found %d of the columns %v", table, seen, cols)
		}
	}
}
