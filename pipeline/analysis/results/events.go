package results

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// The session events a results directory can hold, both read by the view
// events: the files forklab log export writes, and the Hive-partitioned
// files of forklab log sink (pipeline/sink).
const (
	// ExportGlob matches forklab log export's files, DIR/events/NAME.parquet.
	ExportGlob = "events/**/*.parquet"
	// SinkGlob matches forklab log sink's files,
	// DIR/sink/event_date=YYYY-MM-DD/TOPIC+PARTITION+FIRST+LAST.parquet;
	// event_date becomes a column.
	SinkGlob = "sink/event_date=*/*.parquet"
)

// EventsView returns the statement that defines the view events over the
// session events in results directory dir: the union, by column name, of
// the exported files and the sink's files, whichever exist. ok is false when
// neither does: DuckDB refuses a glob that matches nothing, so the view
// cannot be defined yet. The globs are expanded when the view is queried,
// so files the sink adds later are seen without redefining it.
func EventsView(dir string) (stmt string, ok bool, err error) {
	exported, err := hasParquet(filepath.Join(dir, "events"))
	if err != nil {
		return "", false, err
	}
	sunk, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(SinkGlob)))
	if err != nil {
		return "", false, err
	}
	var parts []string
	if exported {
		parts = append(parts, "SELECT * FROM read_parquet('"+ExportGlob+"', hive_partitioning = true, union_by_name = true)")
	}
	if len(sunk) > 0 {
		parts = append(parts, "SELECT * FROM read_parquet('"+SinkGlob+"', hive_partitioning = true, union_by_name = true)")
	}
	if len(parts) == 0 {
		return "", false, nil
	}
	return "CREATE OR REPLACE VIEW events AS " + strings.Join(parts, " UNION ALL BY NAME "), true, nil
}

// hasParquet reports whether dir holds a .parquet file at any depth; a
// missing dir holds none.
func hasParquet(dir string) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == dir {
				return filepath.SkipAll
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".parquet") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("look for session events: %w", err)
	}
	return found, nil
}
