package sweep

import (
	"reflect"
	"testing"

	"github.com/forklab/forklab/internal/jsonkeys"
)

// The unit ledger's entries have snake_case keys, like every file forklab
// writes (internal/jsonkeys).
func TestLedgerJSONKeys(t *testing.T) {
	for _, bad := range jsonkeys.Check(reflect.TypeFor[ledgerEntry]()) {
		t.Errorf("%s: not snake_case", bad)
	}
}
