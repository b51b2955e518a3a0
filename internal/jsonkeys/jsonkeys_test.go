package jsonkeys

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

type inner struct {
	Steps int64
	USD   float64 `json:"usd"`
}

type embedded struct {
	Seed uint64 `json:"seed"`
}

type outer struct {
	embedded
	Name     string           `json:"name"`
	Cost     inner            `json:"cost"`
	ByName   map[string]inner `json:"by_name"`
	List     []*inner         `json:"list"`
	When     time.Time        `json:"when"` // MarshalJSON: trusted
	Skipped  inner            `json:"-"`
	ForkStep int              `json:"forkStep"`
	private  inner
}

// Check names every field whose key is not snake_case, through nesting,
// maps, slices and pointers, once per type; tagged, skipped, embedded and
// self-marshalling fields pass.
func TestCheck(t *testing.T) {
	got := Check(reflect.TypeFor[outer]())
	want := []string{`outer.Cost.Steps: key "Steps"`, `outer.ForkStep: key "forkStep"`}
	if !slices.Equal(got, want) {
		t.Errorf("Check = %q, want %q", got, want)
	}
	if got := Check(reflect.TypeFor[embedded]()); len(got) != 0 {
		t.Errorf("clean type: %q", got)
	}
}
