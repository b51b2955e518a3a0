package sweep

import (
	"testing"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/world"
)

// The unit writer writes the fixed columns by position (brScore,
// prScoreDiff, …) and counts checkpoint and the extra_ columns from the
// declared ones: every position is the column's in schemas.TableColumns,
// for a pass/fail world with a fault flag (counter) and a scored one
// (toolloop), a recorded population with transcripts and a seed one. A
// column added to a table's front (noise_key after replica, score after
// success) that the positions did not follow fails here, naming it.
func TestFixedColumnPositions(t *testing.T) {
	for _, name := range []string{"counter", "toolloop"} {
		def, err := lab.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		d := def.Declaration()
		for _, runs := range []*Runs{nil, {Metadata: true}} {
			ls, err := layoutsFor(d, runs, runs != nil)
			if err != nil {
				t.Fatal(err)
			}
			want := map[*layout]map[string]int{
				ls.tasks:       {"seed": colSeed, "status": colStatus, "error": colStatus + 1},
				ls.checkpoints: {"seed": colSeed, "status": colStatus, "error": colStatus + 1, "over": cpOver},
				ls.branches: {"seed": colSeed, "arm": brArm, "replica": brReplica, "noise_key": brNoiseKey,
					"status": brStatus, "error": brStatus + 1, "intervened": brIntervened, "success": brSuccess,
					"score": brScore, "details": brDetails},
				ls.pairs: {"seed": colSeed, "arm": prArm, "replicas": prReplicas, "status": prStatus, "error": prStatus + 1,
					"control_wins": prControlWins, "treatment_wins": prTreatmentWins, "control_success": prControlSuccess,
					"treatment_success": prTreatmentSuccess, "label": prLabel, "quadrant": prQuadrant, "fault": prFault,
					"score_control": prScoreControl, "score_treated": prScoreTreated, "score_diff": prScoreDiff},
			}
			for i, f := range world.CostFields {
				want[ls.branches]["cost_"+f] = brCost + i
			}
			w := newUnitWriter(Resolved{Decl: d}, ls, t.TempDir(), Options{}, newSyncer(), func(ledgerEntry, error) {})
			kinds := len(d.Features) + len(d.Hidden)
			want[ls.checkpoints]["checkpoint"] = w.cpFeat + kinds + len(world.CostFields)
			for i, f := range world.CostFields {
				want[ls.checkpoints]["cost_"+f] = w.cpFeat + kinds + i
				want[ls.pairs]["extra_"+f] = w.pairFeat + kinds + i
			}
			if len(d.Features) > 0 {
				want[ls.checkpoints][d.Features[0].Name] = w.cpFeat
				want[ls.pairs][d.Features[0].Name] = w.pairFeat
			}
			if len(d.Task) > 0 {
				want[ls.tasks][d.Task[0].Name] = w.taskCol
			}
			want[ls.tasks]["run_id"], want[ls.tasks]["metadata"] = w.taskRun, w.taskMeta
			want[ls.checkpoints]["run_id"] = w.cpRun
			want[ls.branches]["run_id"], want[ls.branches]["transcript"] = w.brRun, w.transcriptCol
			want[ls.pairs]["run_id"] = w.prRun
			w.close()
			for l, cols := range want {
				for col, at := range cols {
					if got := l.index(col); got != at || got < 0 {
						t.Errorf("%s (runs %t): the writer puts %s.%s at column %d; schemas.TableColumns has it at %d", name, runs != nil, l.table, col, at, got)
					}
				}
			}
		}
	}
}
