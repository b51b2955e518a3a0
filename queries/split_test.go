package queries

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitStatements(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"one", "SELECT 1", []string{"SELECT 1"}},
		{"trailing semicolon and comment", "SELECT 1; -- done\n", []string{"SELECT 1"}},
		{"two", "SET VARIABLE holdout = 0.2;\nSELECT getvariable('holdout')", []string{"SET VARIABLE holdout = 0.2", "\nSELECT getvariable('holdout')"}},
		{"leading comment kept", "-- q; with a semicolon\nSELECT 1;", []string{"-- q; with a semicolon\nSELECT 1"}},
		{"string", "SELECT 'a;b'''; SELECT 2", []string{"SELECT 'a;b'''", " SELECT 2"}},
		{"escape string", `SELECT E'it\'s;'; SELECT 2`, []string{`SELECT E'it\'s;'`, " SELECT 2"}},
		{"identifier", `SELECT 1 AS "x;y"""; SELECT 2`, []string{`SELECT 1 AS "x;y"""`, " SELECT 2"}},
		{"block comment nests", "SELECT /* a /* ; */ ; */ 1; SELECT 2", []string{"SELECT /* a /* ; */ ; */ 1", " SELECT 2"}},
		{"dollar", "SELECT $$a;b$$, $t$c;$$;d$t$; SELECT $1", []string{"SELECT $$a;b$$, $t$c;$$;d$t$", " SELECT $1"}},
		{"only comments", "-- nothing\n/* here */ ;;", nil},
		{"unterminated string", "SELECT 'a; SELECT 2", []string{"SELECT 'a; SELECT 2"}},
		{"identifier ending in e", "SELECT name'x'; SELECT 2", []string{"SELECT name'x'", " SELECT 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Split(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Split(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// Every embedded query file splits into the statements it declares: the
// report queries are one statement each; stats.sql holds one CREATE per
// macro.
func TestSplitQueryFiles(t *testing.T) {
	for _, name := range Names() {
		text := MustGet(name)
		n := max(1, strings.Count(text, "\nCREATE OR REPLACE "))
		if got := len(Split(text)); got != n {
			t.Errorf("queries/%s.sql: %d statements, want %d", name, got, n)
		}
	}
}
