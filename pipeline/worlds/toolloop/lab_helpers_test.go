package toolloop_test

import (
	"testing"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// newLab returns fork.Lab over the toolloop world with p, played by m.
func newLab(t testing.TB, p toolloop.Params, m fork.Model) fork.Lab[toolloop.State] {
	t.Helper()
	w, err := toolloop.NewWith(p)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := fork.NewLab[toolloop.State](w, m)
	if err != nil {
		t.Fatal(err)
	}
	return lab
}
