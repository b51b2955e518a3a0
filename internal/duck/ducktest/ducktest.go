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
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = fmt.Sprint(v)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}
