package scaleout

import (
	"reflect"
	"testing"

	"github.com/forklab/forklab/internal/jsonkeys"
)

// The JSON records this package writes have snake_case keys only, like
// every file forklab writes (internal/jsonkeys).
func TestJSONKeysAreSnakeCase(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[attempt](),
		reflect.TypeFor[shareRecord](),
		reflect.TypeFor[sweepRecord](),
	} {
		for _, bad := range jsonkeys.Check(typ) {
			t.Errorf("%s: not snake_case", bad)
		}
	}
}
