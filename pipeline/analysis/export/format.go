package export

import (
	"errors"
	"fmt"
	"strings"
)

// Format is an output format of Query.
type Format string

// The formats. Table is for people; the others are for programs.
const (
	// Table is an aligned text table with a header row, as forklab report
	// prints its tables; NULL prints as NULL.
	Table Format = "table"
	// CSV is RFC 4180 comma-separated values with a header row, written by
	// DuckDB's COPY (NULL is an empty field).
	CSV Format = "csv"
	// JSON is one JSON array of row objects, written by DuckDB's COPY.
	JSON Format = "json"
	// NDJSON is JSON Lines: one row object per line, written by DuckDB's
	// COPY.
	NDJSON Format = "ndjson"
	// Parquet is a zstd-compressed Parquet file, written by DuckDB's COPY.
	Parquet Format = "parquet"
	// Arrow is the Arrow IPC file format (random access; Feather v2;
	// extension .arrow), read through DuckDB's Arrow interface.
	Arrow Format = "arrow"
	// ArrowStream is the Arrow IPC streaming format (extension .arrows).
	ArrowStream Format = "arrows"
)

// Formats lists every format, in the order help texts show them.
var Formats = []Format{Table, CSV, JSON, NDJSON, Parquet, Arrow, ArrowStream}

// ParseFormat reads a format name (case-insensitive; "jsonl" is NDJSON).
func ParseFormat(s string) (Format, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "jsonl" {
		return NDJSON, nil
	}
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("unknown format %q (have: %s)", s, strings.Join(names, ", "))
}

// Binary reports formats that are not text: writing them to a terminal is
// refused.
func (f Format) Binary() bool { return f == Parquet || f == Arrow || f == ArrowStream }

// copyOptions is the option list of DuckDB's COPY … TO for the formats COPY
// writes; "" for the others.
func (f Format) copyOptions() string {
	switch f {
	case CSV:
		return "FORMAT csv, HEADER true"
	case JSON:
		return "FORMAT json, ARRAY true"
	case NDJSON:
		return "FORMAT json"
	case Parquet:
		return "FORMAT parquet, COMPRESSION zstd"
	}
	return ""
}

// ErrNoArrow reports the arrow formats in a forklab built without the
// build tag duckdb_arrow, which duckdb-go needs for its Arrow interface.
var ErrNoArrow = errors.New("this forklab was built without Arrow support (build tag duckdb_arrow): build it with 'make build' or 'go build -tags duckdb_arrow ./cmd/forklab'")

// extFormats maps an output file's extension to the format it names.
var extFormats = map[string]Format{
	".txt": Table, ".csv": CSV, ".json": JSON, ".ndjson": NDJSON, ".jsonl": NDJSON,
	".parquet": Parquet, ".arrow": Arrow, ".feather": Arrow, ".arrows": ArrowStream,
}

// compressedByName reports formats DuckDB's COPY writes, which compress
// themselves as their file's name asks (.gz, .zst).
func (f Format) compressedByName() bool { return f == CSV || f == JSON || f == NDJSON }

// OutFormat is the format to write to the file path: the format its name
// names (pairs.parquet, rows.csv.gz) when format was not given, or format
// when it was. A name that names another format than the one given, and a
// compressed name (.gz, .zst) for a format that is not compressed by its
// name (table, parquet, arrow), are refused: the file would hold something
// else than its name says. A name without a known extension takes format.
func OutFormat(path string, format Format, given bool) (Format, error) {
	name := strings.ToLower(path)
	comp := ""
	for _, c := range []string{".gz", ".zst"} {
		if strings.HasSuffix(name, c) {
			name, comp = strings.TrimSuffix(name, c), c
		}
	}
	byName, named := Format(""), false
	if i := strings.LastIndexByte(name, '.'); i >= 0 && !strings.ContainsRune(name[i:], '/') {
		byName, named = extFormats[name[i:]]
	}
	f := format
	switch {
	case named && !given:
		f = byName
	case named && byName != format:
		return "", fmt.Errorf("--out %s names %s output but --format is %s: give --format %s, or an --out name that ends in .%s", path, byName, format, byName, extOf(format))
	}
	if comp != "" && !f.compressedByName() {
		return "", fmt.Errorf("--out %s asks for %s compression, which %s output does not take (csv, json and ndjson do): leave %s off the name", path, comp, f, comp)
	}
	return f, nil
}

// extOf is the usual extension of format f, without the dot.
func extOf(f Format) string {
	if f == Table {
		return "txt"
	}
	return string(f)
}
