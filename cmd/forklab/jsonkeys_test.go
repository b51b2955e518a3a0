package main

import (
	"reflect"
	"testing"

	"github.com/forklab/forklab/internal/jsonkeys"
	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/scaleout"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/pipeline/world"
)

// Every JSON file and output forklab writes has snake_case keys only
// (issue 12, a finding of the QA pass: manifest.json's cost object came
// out as {"Steps":…,"USD":…}): the manifest, policy.json, worlds --json,
// fork --json (from a checkpoint and from the log), agent check --json,
// session events, the work-unit and report records of a distributed sweep,
// and the branch outcome they carry. The packages' own tests check their
// unexported records (the unit ledger, the agent journal, the sink's
// state, a worker's attempt records).
func TestJSONKeysAreSnakeCase(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[sweep.Manifest](),
		reflect.TypeFor[policy.Rule](),
		reflect.TypeFor[[]world.Declaration](),
		reflect.TypeFor[forkOutcome](),
		reflect.TypeFor[streamForkOutcome](),
		reflect.TypeFor[agentproc.CheckResult](),
		reflect.TypeFor[session.Event](),
		reflect.TypeFor[scaleout.UnitMsg](),
		reflect.TypeFor[scaleout.Report](),
		reflect.TypeFor[lab.Outcome](),
		reflect.TypeFor[agentproc.Cost](),
	} {
		for _, bad := range jsonkeys.Check(typ) {
			t.Errorf("%s: not snake_case", bad)
		}
	}
}
