package recorded

import (
	"context"
	"database/sql"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/forklab/forklab/internal/duck"
	"github.com/forklab/forklab/pipeline/lab"
)

// parquetSource is a Parquet file of records, one per row, read through
// DuckDB: each row becomes the JSON object of its columns (to_json: a
// VARCHAR column of JSON text, as a checkpoints table's checkpoint, is a
// JSON string, which a record reads as the JSON it holds), so a row is
// read as a line of a JSON Lines file is. A row's position is its row
// number in the file.
type parquetSource struct {
	path    string
	o       Options
	listing Listing
	size    int64
	mtime   time.Time
	query   string // rows [lo, hi) as (row number, JSON), in order: $1, $2
}

func openParquet(ctx context.Context, path string, o Options) (*parquetSource, error) {
	if strings.ContainsAny(path, "*?[{") {
		return nil, fmt.Errorf("runs %s: a Parquet path may not hold * ? [ {, which DuckDB reads as a glob", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("runs %s is a directory: give a .jsonl or .parquet file of records", path)
	}
	s := &parquetSource{path: path, o: o, size: fi.Size(), mtime: fi.ModTime()}
	crc, err := fileCRC(path)
	if err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	db, err := duck.Open("")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	cols, err := parquetColumns(ctx, db, path)
	if err != nil {
		return nil, err
	}
	fields := make([]string, len(cols))
	for i, c := range cols {
		q := `"` + strings.ReplaceAll(c, `"`, `""`) + `"`
		fields[i] = q + " := " + q
	}
	s.query = "SELECT file_row_number, CAST(to_json(struct_pack(" + strings.Join(fields, ", ") + ")) AS VARCHAR)\n" +
		"FROM read_parquet(" + duck.Quote(path) + ", file_row_number = true)\n" +
		"WHERE file_row_number >= $1 AND file_row_number < $2 ORDER BY file_row_number"
	rows, err := db.QueryContext(ctx, s.query, 0, int64(1)<<62)
	if err != nil {
		return nil, fmt.Errorf("runs %s: %w", path, duck.Message(err))
	}
	defer rows.Close()
	var (
		rec  lab.Record
		t    = newTally(o)
		row  int64
		text string
	)
	for rows.Next() {
		if err := rows.Scan(&row, &text); err != nil {
			return nil, fmt.Errorf("runs %s: %w", path, err)
		}
		if err := t.add([]byte(text), path+" row "+strconv.FormatInt(row+1, 10), &rec); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs %s: %w", path, duck.Message(err))
	}
	if len(t.ids) == 0 {
		return nil, fmt.Errorf("runs %s holds no record: a record is a row with run_id and checkpoint", path)
	}
	if t.repeats() {
		if err := s.duplicates(ctx, db); err != nil {
			return nil, err
		}
	}
	s.listing = Listing{Format: FormatParquet, Runs: uint64(len(t.ids)), Bytes: s.size, CRC32C: crc,
		ForkSteps: sortedSteps(t.steps), Metadata: t.meta}
	return s, s.Check()
}

// parquetColumns names the columns of the Parquet file at path.
func parquetColumns(ctx context.Context, db *sql.DB, path string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT column_name FROM (DESCRIBE SELECT * FROM read_parquet("+duck.Quote(path)+"))")
	if err != nil {
		return nil, fmt.Errorf("runs %s is not a readable Parquet file: %w", path, duck.Message(err))
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// duplicates names the first run id two rows share.
func (s *parquetSource) duplicates(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, s.query, 0, int64(1)<<62)
	if err != nil {
		return fmt.Errorf("runs %s: %w", s.path, duck.Message(err))
	}
	defer rows.Close()
	seen := map[string]int64{}
	var rec lab.Record
	for rows.Next() {
		var row int64
		var text string
		if err := rows.Scan(&row, &text); err != nil {
			return err
		}
		if parseRecord([]byte(text), "", &rec) != nil {
			continue
		}
		if first, ok := seen[rec.RunID]; ok {
			return lab.BadRecord(fmt.Sprintf("%s row %d", s.path, row+1), "run_id %q is that of row %d too: run ids must be unique in a population", rec.RunID, first+1)
		}
		seen[rec.RunID] = row
	}
	return rows.Err()
}

func (s *parquetSource) Listing() Listing { return s.listing }

func (s *parquetSource) Close() error { return nil }

// Check compares the file's size and modification time with the
// listing's.
func (s *parquetSource) Check() error { return checkFile(s.path, s.size, s.mtime) }

// Read reads rows [lo, hi) through DuckDB, after checking that the file is
// as it was listed.
func (s *parquetSource) Read(ctx context.Context, lo, hi uint64) (lab.Records, func(), error) {
	if err := s.Check(); err != nil {
		return nil, nil, err
	}
	db, err := duck.Open("")
	if err != nil {
		return nil, nil, err
	}
	rows, err := db.QueryContext(ctx, s.query, int64(lo), int64(hi))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("runs %s: %w", s.path, duck.Message(err))
	}
	done := func() {
		rows.Close()
		db.Close()
	}
	var rec lab.Record
	want := lo
	next := func(ctx context.Context) (*lab.Record, error) {
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return nil, fmt.Errorf("runs %s: %w", s.path, duck.Message(err))
			}
			if want != hi {
				return nil, fmt.Errorf("runs %s %w: row %d is missing", s.path, ErrChanged, want+1)
			}
			return nil, s.Check()
		}
		var row int64
		var text string
		if err := rows.Scan(&row, &text); err != nil {
			return nil, err
		}
		if uint64(row) != want {
			return nil, fmt.Errorf("runs %s %w: row %d is missing", s.path, ErrChanged, want+1)
		}
		want++
		if err := parseRecord([]byte(text), s.path+" row "+strconv.FormatInt(row+1, 10), &rec); err != nil {
			return nil, err
		}
		if !s.o.Builtin {
			if _, err := recordStep(&rec, s.o); err != nil {
				return nil, err
			}
		}
		rec.Pos = uint64(row)
		return &rec, nil
	}
	return next, done, nil
}

// fileCRC is the CRC-32C of the file at path, in hex.
func fileCRC(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return crcText(h.Sum32()), nil
}
