package export

import (
	"os"
	"strings"
	"testing"
)

// TestOutFormat runs testdata/cli/sql-out-names.txt against OutFormat: the
// name of --out says the format when --format is not given, and a name
// that contradicts the format, or asks for a compression it does not take,
// is refused. forklab sql --out pairs.parquet used to write a text table
// under that name, and --out rows.parquet.gz an uncompressed Parquet file.
func TestOutFormat(t *testing.T) {
	b, err := os.ReadFile("../../../testdata/cli/sql-out-names.txt")
	if err != nil {
		t.Fatal(err)
	}
	cases := 0
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 3 {
			t.Fatalf("malformed line %q", line)
		}
		name, given, want := fields[0], fields[1] != "-", fields[2]
		format := Table
		if given {
			if format, err = ParseFormat(fields[1]); err != nil {
				t.Fatal(err)
			}
		}
		got, err := OutFormat(name, format, given)
		cases++
		if msg, refused := strings.CutPrefix(want, "refused: "); refused {
			if err == nil || !strings.Contains(err.Error(), msg) {
				t.Errorf("OutFormat(%q, %s, %v) = %s, %v; want an error with %q", name, format, given, got, err, msg)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("OutFormat(%q, %s, %v) = %s, %v; want %s", name, format, given, got, err, want)
		}
	}
	if cases < 20 {
		t.Fatalf("read %d cases", cases)
	}
}
