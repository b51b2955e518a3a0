package policy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/pipeline/worlds/counter"
	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// FuzzPolicy: any bytes given as a policy file (forklab sweep --policy,
// forklab gate) are refused, or are a rule that encodes and decodes to
// itself and that, for each built-in world, is refused by Check or
// compiles to a guard that runs on every checkpoint's features. Seeds are
// testdata/policy/*.json, the f.Add calls and testdata/fuzz/FuzzPolicy/
// beside this file (Go's layout: a failing input found goes there).
func FuzzPolicy(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "testdata", "policy", "*.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	type target struct {
		decl     world.Declaration
		features [][]world.Value
	}
	var targets []target
	for _, def := range []lab.Definition{counter.Definition, toolloop.Definition} {
		d := def.Declaration()
		params, _ := d.Resolve(nil)
		inst, err := def.Open(params, fork.Model{Temperature: 0.5, NoTool: 0.3})
		if err != nil {
			f.Fatal(err)
		}
		tg := target{decl: d}
		for seed := uint64(0); seed < 20; seed++ {
			cp, err := inst.Checkpoint(seed, 1+int(seed%4))
			if err != nil {
				f.Fatal(err)
			}
			tg.features = append(tg.features, cp.Features)
		}
		nulls := make([]world.Value, len(d.Features))
		for i := range nulls {
			nulls[i].Null = true
		}
		tg.features = append(tg.features, nulls)
		targets = append(targets, tg)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := policy.Decode(b)
		if err != nil {
			return
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatalf("a decoded rule does not encode: %v", err)
		}
		again, err := policy.Decode(enc)
		if err != nil {
			t.Fatalf("a rule's encoding does not decode: %v\n%s", err, enc)
		}
		if enc2, _ := again.Encode(); !bytes.Equal(enc, enc2) || r.String() != again.String() {
			t.Fatalf("rule round trip:\n%s\n%s", enc, enc2)
		}
		_ = r.String()
		for _, tg := range targets {
			fire, err := r.Compile(tg.decl)
			if err != nil {
				continue
			}
			for _, fs := range tg.features {
				fire(fs)
			}
		}
	})
}
