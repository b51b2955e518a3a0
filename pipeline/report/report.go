// Package report turns a results directory into the text report forklab
// prints: a headline per treatment arm (rescued, harmed, unchanged, net),
// the summary table and the per-feature slices, all read through DuckDB from
// the embedded queries.
package report

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/forklab/forklab/pipeline/results"
)

// Write prints the report of the results in db to w.
func Write(ctx context.Context, w io.Writer, db *results.DB) error {
	m := db.Manifest
	fmt.Fprintf(w, "forklab report · %s · world %s · seeds %s · fork at %s · arms %s · replicas %d\n\n",
		db.Dir, m.Spec.World, m.Spec.Seeds, joinInts(m.Spec.ForkAt), joinArms(m.Spec.Arms), m.Spec.Replicas)
	summary, err := db.Run(ctx, "summary")
	if err != nil {
		return err
	}
	idx := columnIndex(summary)
	for _, row := range summary.Rows {
		fmt.Fprintf(w, "%s vs off · fork step %v%s · %v pairs\n", row[idx["arm"]], row[idx["fork_step"]],
			configSuffix(len(m.Configs), row[idx["config_id"]]), row[idx["pairs"]])
		fmt.Fprintf(w, "  rescued %v   harmed %v   unchanged %v   net %+d\n\n",
			row[idx["rescued"]], row[idx["harmed"]], row[idx["unchanged"]], toInt(row[idx["net"]]))
	}
	fmt.Fprintln(w, "SUMMARY")
	if err := WriteTable(w, summary); err != nil {
		return err
	}
	slices, err := db.Run(ctx, "slices")
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "\nSLICES (pre-decision features; counts per value)")
	return WriteTable(w, slices)
}

func columnIndex(t *results.Table) map[string]int {
	m := make(map[string]int, len(t.Columns))
	for i, c := range t.Columns {
		m[c] = i
	}
	return m
}

func configSuffix(configs int, id any) string {
	if configs <= 1 {
		return ""
	}
	return fmt.Sprintf(" · config %v", id)
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case int:
		return int64(x)
	case float64:
		return int64(x)
	}
	return 0
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func joinArms[T ~string](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ",")
}
