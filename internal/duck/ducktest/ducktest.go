// Package ducktest is for tests: it queries a results directory's Parquet
// files through DuckDB, as a user's ad hoc SQL would, and returns the rows
// as text, so that a test states the numbers it expects.
package ducktest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/forklab/forklab/internal/duck"
)

// tables are the placeholders Query replaces: each table of a results
// directory, read from its Hive-partitioned Parquet files.
var tables = strings.NewReplacer(
	"{pairs}", "read_parquet('pairs/*/*/*.parquet', hive_partitioning = true, union_by_name = true)",
	"{branches}", "read_parquet('branches/*/*/*.parquet', hive_partitioning = true, union_by_name = true)",
	"{checkpoints}", "read_parquet('checkpoints/*/*/*.parquet', hive_partitioning = true, union_by_name = true)",
	"{tasks}", "read_parquet('tasks/*/*.parquet', hive_partitioning = true, union_by_name = true)",
)

// Query runs q over results directory dir, in an in-memory DuckDB
// database (duck.Open: UTC, no extension fetched) whose relative paths
// resolve in dir, and returns its rows, each value as fmt.Sprint writes it
// (NULL as <nil>). In q, {pairs}, {branches}, {checkpoints} and {tasks}
// stand for the tables. Any error fails the test.
func Query(t testing.TB, dir, q string) [][]string {
	t.Helper()
	db, err := duck.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("SET file_search_path = " + duck.Quote(dir)); err != nil {
		t.Fatal(err)
	}
	q = tables.Replace(q)
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	_, vals, err := duck.ScanAll(rows)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out := make([][]string, len(vals))
	for r, row := range vals {
		out[r] = make([]string, len(row))
		for i, v := range row {
			out[r][i] = fmt.Sprint(v)
		}
	}
	return out
}
