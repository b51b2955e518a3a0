package sweep

import (
	"encoding/json"
	"testing"

	"github.com/forklab/forklab/pipeline/world"
)

// A --resume refused because the world declares itself otherwise names the
// field that changed with its then and now values, as a changed spec key
// does ("seeds: "0:20" then, "0:30" now"); it once said only "its version,
// parameters, features or arms changed".
func TestSpecDiffNamesTheDeclarationField(t *testing.T) {
	base := world.Declaration{Name: "drift", Version: "1",
		Params:        []world.Param{{Name: "horizon", Kind: world.ParamInt, Default: int64(6), Description: "steps"}},
		Features:      []world.Field{{Name: "stalls", Kind: world.Int, Description: "stalls so far"}, {Name: "last_ok", Kind: world.Bool, Description: "ok"}},
		Interventions: []world.Intervention{{Arm: "on", Action: "retry", Description: "retry"}},
		Cost:          world.CostModel{Fields: []string{"steps"}}}
	record := func(d world.Declaration) []byte {
		b, err := json.Marshal(struct {
			Spec        Spec              `json:"spec"`
			Declaration world.Declaration `json:"declaration"`
		}{DefaultSpec(), d})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	prefix := "the world declares itself otherwise now (for an agent, its initialize reply): "
	for _, tc := range []struct {
		name string
		edit func(d *world.Declaration)
		want string
	}{
		{"version", func(d *world.Declaration) { d.Version = "2" }, `version: "1" then, "2" now`},
		{"parameter default", func(d *world.Declaration) { d.Params[0].Default = int64(8) }, `params.horizon.default: 6 then, 8 now`},
		{"feature added", func(d *world.Declaration) {
			d.Features = append(d.Features, world.Field{Name: "rate", Kind: world.Float, Description: "r"})
		}, `features.rate: unset then, {"description":"r","name":"rate","type":"float"} now`},
		{"feature type", func(d *world.Declaration) { d.Features[0].Kind = world.Float }, `features.stalls.type: "int" then, "float" now`},
		{"arms", func(d *world.Declaration) {
			d.Interventions = append(d.Interventions, world.Intervention{Arm: "placebo", Action: "wait", Description: "w"})
		}, `interventions.placebo: unset then, {"action":"wait","arm":"placebo","description":"w"} now`},
	} {
		d := base
		d.Params = append([]world.Param(nil), base.Params...)
		d.Features = append([]world.Field(nil), base.Features...)
		tc.edit(&d)
		if got := specDiff(record(base), record(d)); got != prefix+tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, prefix+tc.want)
		}
	}
}

// Transcripts are part of what a sweep computes (its branches files hold
// them or not): a --resume that asks otherwise is another spec, named.
func TestSpecDiffNamesTranscripts(t *testing.T) {
	record := func(s Spec) []byte {
		b, err := json.Marshal(struct {
			Spec Spec `json:"spec"`
		}{s.Identity()})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	kept := DefaultSpec()
	kept.Transcripts = true
	if got, want := specDiff(record(kept), record(DefaultSpec())), "transcripts: true then, unset now"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
