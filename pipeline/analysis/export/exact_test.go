package export

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// A value of one DuckDB type and what each format must write for it. An
// expectation starting with "!" is an error the format must give instead,
// holding that text (the column's name and the cast to use); "" for text
// means the same as the row before (unused).
type typeCase struct {
	name, expr string
	// text is DuckDB's own rendering (CAST AS VARCHAR): the table cell,
	// and the CSV field before RFC 4180 quoting.
	text string
	// json is the JSON value written (json and ndjson).
	json string
	// parquet is the value read back from the Parquet file by DuckDB, as
	// text, then a space and the type DuckDB reads it as.
	parquet string
	// arrow is the Arrow type, a space, and arrow-go's ValueStr of it.
	arrow string
}

// typeCases covers DuckDB's types, their boundary values and the values
// a format cannot hold (issue 12 B).
var typeCases = []typeCase{
	{"i8", "(-128)::TINYINT", "-128", "-128", "-128 TINYINT", "int8 -128"},
	{"i16", "32767::SMALLINT", "32767", "32767", "32767 SMALLINT", "int16 32767"},
	{"i32", "(-2147483648)::INTEGER", "-2147483648", "-2147483648", "-2147483648 INTEGER", "int32 -2147483648"},
	{"i64", "9223372036854775807::BIGINT", "9223372036854775807", "9223372036854775807", "9223372036854775807 BIGINT", "int64 9223372036854775807"},
	{"u8", "255::UTINYINT", "255", "255", "255 UTINYINT", "uint8 255"},
	{"u32", "4294967295::UINTEGER", "4294967295", "4294967295", "4294967295 UINTEGER", "uint32 4294967295"},
	{"u64", "18446744073709551615::UBIGINT", "18446744073709551615", "18446744073709551615", "18446744073709551615 UBIGINT", "uint64 18446744073709551615"},
	// The sum: Parquet wrote DOUBLE 18014398509481988.
	{"sum", "(SELECT sum(x) FROM (VALUES (9007199254740993::BIGINT), (9007199254740994::BIGINT)) AS s(x))", "18014398509481987", "18014398509481987", "18014398509481987 DECIMAL(38,0)", "decimal(38, 0) 18014398509481987"},
	{"hsum", "18014398509481987::HUGEINT", "18014398509481987", "18014398509481987", "18014398509481987 DECIMAL(38,0)", "decimal(38, 0) 18014398509481987"},
	{"h38", "(-99999999999999999999999999999999999999)::HUGEINT", "-99999999999999999999999999999999999999", "-99999999999999999999999999999999999999",
		"-99999999999999999999999999999999999999 DECIMAL(38,0)", "decimal(38, 0) -99999999999999999999999999999999999999"},
	{"hmax", "170141183460469231731687303715884105727::HUGEINT", "170141183460469231731687303715884105727", "170141183460469231731687303715884105727",
		`!column "hmax" holds 170141183460469231731687303715884105727, which has more than 38 digits`, `!cast it to VARCHAR (CAST("hmax" AS VARCHAR))`},
	{"uh38", "99999999999999999999999999999999999999::UHUGEINT", "99999999999999999999999999999999999999", "99999999999999999999999999999999999999",
		"99999999999999999999999999999999999999 DECIMAL(38,0)", "decimal(38, 0) 99999999999999999999999999999999999999"},
	// Arrow read this one as -1.
	{"uhmax", "340282366920938463463374607431768211455::UHUGEINT", "340282366920938463463374607431768211455", "340282366920938463463374607431768211455",
		`!column "uhmax" holds 340282366920938463463374607431768211455`, `!column "uhmax" holds 340282366920938463463374607431768211455`},
	{"dec", "123456789012345678.901234567890123456::DECIMAL(38,18)", "123456789012345678.901234567890123456", "123456789012345678.901234567890123456",
		"123456789012345678.901234567890123456 DECIMAL(38,18)", "decimal(38, 18) 123456789012345678.901234567890123456"},
	{"dec4", "(-1.10)::DECIMAL(4,2)", "-1.10", "-1.1", "-1.10 DECIMAL(4,2)", "decimal(4, 2) -1.1"},
	{"f32", "0.1::FLOAT", "0.1", "0.10000000149011612", "0.1 FLOAT", "float32 0.1"},
	{"f64", "0.1::DOUBLE + 0.2", "0.30000000000000004", "0.30000000000000004", "0.30000000000000004 DOUBLE", "float64 0.30000000000000004"},
	{"tiny", "5e-324::DOUBLE", "5e-324", "5e-324", "5e-324 DOUBLE", "float64 5e-324"},
	{"negz", "-0.0::DOUBLE", "-0.0", "-0.0", "-0.0 DOUBLE", "float64 -0"},
	{"nan", "'NaN'::DOUBLE", "nan", `!column "nan" holds nan, with NaN or infinity, which JSON has no number for; cast it to write such values as text: CAST("nan" AS VARCHAR)`, "nan DOUBLE", "float64 NaN"},
	{"ninf", "'-inf'::FLOAT", "-inf", `!column "ninf" holds -inf`, "-inf FLOAT", "float32 -Inf"},
	{"d", "DATE '2024-02-29'", "2024-02-29", `"2024-02-29"`, "2024-02-29 DATE", "date32 2024-02-29"},
	{"dmin", "DATE '0001-01-01'", "0001-01-01", `"0001-01-01"`, "0001-01-01 DATE", "date32 0001-01-01"},
	// Other readers would see 5881580-07-11.
	{"dinf", "'infinity'::DATE", "infinity", `"infinity"`, `!column "dinf" holds infinity, with infinity in a date or timestamp, which Parquet has no value for`, `!column "dinf" holds infinity, with infinity in a date or timestamp, which Arrow has no value for`},
	{"t", "TIME '23:59:59.999999'", "23:59:59.999999", `"23:59:59.999999"`, "23:59:59.999999 TIME", "time64[us] 23:59:59.999999"},
	{"tns", "'12:34:56.123456789'::TIME_NS", "12:34:56.123456789", `"12:34:56.123456789"`, "12:34:56.123456789 TIME_NS", "time64[ns] 12:34:56.123456789"},
	// Parquet shifts it to 07:04:56+00; Arrow drops the offset.
	{"ttz", "'12:34:56+05:30'::TIMETZ", "12:34:56+05:30", `"12:34:56+05:30"`, `!column "ttz" is TIME WITH TIME ZONE: Parquet keeps no time zone offset with a time of day; cast it: CAST("ttz" AS VARCHAR)`,
		`!column "ttz" is TIME WITH TIME ZONE: Arrow keeps no time zone offset`},
	{"ts", "TIMESTAMP '2024-02-29 12:34:56.789012'", "2024-02-29 12:34:56.789012", `"2024-02-29 12:34:56.789012"`, "2024-02-29 12:34:56.789012 TIMESTAMP", "timestamp[us] 2024-02-29T12:34:56.789012Z"},
	{"tss", "'2024-02-29 12:34:56'::TIMESTAMP_S", "2024-02-29 12:34:56", `"2024-02-29 12:34:56"`, "2024-02-29 12:34:56 TIMESTAMP", "timestamp[s] 2024-02-29T12:34:56Z"},
	{"tsms", "'2024-02-29 12:34:56.789'::TIMESTAMP_MS", "2024-02-29 12:34:56.789", `"2024-02-29 12:34:56.789"`, "2024-02-29 12:34:56.789 TIMESTAMP", "timestamp[ms] 2024-02-29T12:34:56.789Z"},
	{"tsns", "'2024-02-29 12:34:56.789012345'::TIMESTAMP_NS", "2024-02-29 12:34:56.789012345", `"2024-02-29 12:34:56.789012345"`, "2024-02-29 12:34:56.789012345 TIMESTAMP_NS", "timestamp[ns] 2024-02-29T12:34:56.789012345Z"},
	// In UTC whatever the host's TZ.
	{"tstz", "TIMESTAMPTZ '2024-02-29 23:30:00.5-02'", "2024-03-01 01:30:00.5+00", `"2024-03-01 01:30:00.5+00"`, "2024-03-01 01:30:00.5+00 TIMESTAMP WITH TIME ZONE", "timestamp[us, tz=UTC] 2024-03-01T01:30:00.5Z"},
	{"tsinf", "'-infinity'::TIMESTAMP", "-infinity", `"-infinity"`, `!column "tsinf" holds -infinity`, `!column "tsinf" holds -infinity`},
	{"ivms", "INTERVAL '1 year 2 months 3 days 04:05:06.007'", "1 year 2 months 3 days 04:05:06.007", `"1 year 2 months 3 days 04:05:06.007"`, "1 year 2 months 3 days 04:05:06.007 INTERVAL",
		`month_day_nano_interval {"months":14,"days":3,"nanoseconds":14706007000000}`},
	// Parquet's INTERVAL holds milliseconds: it dropped the 7 µs.
	{"ivus", "INTERVAL '04:05:06.000007'", "04:05:06.000007", `"04:05:06.000007"`, `!column "ivus" holds 04:05:06.000007, with an interval Parquet cannot hold exactly`,
		`month_day_nano_interval {"months":0,"days":0,"nanoseconds":14706000007000}`},
	// Parquet wrapped this one to 806:57:12.704.
	{"ivbig", "INTERVAL '2000 hours'", "2000:00:00", `"2000:00:00"`, `!column "ivbig" holds 2000:00:00`, `month_day_nano_interval {"months":0,"days":0,"nanoseconds":7200000000000000}`},
	{"ivneg", "INTERVAL '-1 day'", "-1 day", `"-1 day"`, `!column "ivneg" holds -1 day`, `month_day_nano_interval {"months":0,"days":-1,"nanoseconds":0}`},
	// The UUID: the table printed 16 raw bytes.
	{"u", "'01936457-ab44-7710-bc9d-1f3414ac9deb'::UUID", "01936457-ab44-7710-bc9d-1f3414ac9deb", `"01936457-ab44-7710-bc9d-1f3414ac9deb"`,
		"01936457-ab44-7710-bc9d-1f3414ac9deb UUID", "utf8 01936457-ab44-7710-bc9d-1f3414ac9deb"},
	{"b", `'\xAA\x00\xFFab'::BLOB`, `\xAA\x00\xFFab`, `"\\xAA\\x00\\xFFab"`, `\xAA\x00\xFFab BLOB`, "binary qgD/YWI="},
	// Arrow got DuckDB's internal bytes (04 F5).
	{"bits", "'0101'::BIT", "0101", `"0101"`, "0101 VARCHAR", "utf8 0101"},
	{"big", "'-123456789012345678901234567890123456789012345'::BIGNUM", "-123456789012345678901234567890123456789012345", "-123456789012345678901234567890123456789012345",
		"-123456789012345678901234567890123456789012345 VARCHAR", "utf8 -123456789012345678901234567890123456789012345"},
	{"e", "'b'::ENUM('a', 'b')", "b", `"b"`, "b VARCHAR", "dictionary<values=utf8, indices=uint8, ordered=false> b"},
	{"s", `'quote" comma, nl` + "\n" + `é'`, "quote\" comma, nl\né", `"quote\" comma, nl\né"`, "quote\" comma, nl\né VARCHAR", "utf8 quote\" comma, nl\né"},
	{"empty", "''", "", `""`, " VARCHAR", "utf8 "},
	{"bo", "true", "true", "true", "true BOOLEAN", "bool true"},
	{"j", `'{"a": [1, 2]}'::JSON`, `{"a": [1, 2]}`, `{"a":[1,2]}`, `{"a": [1, 2]} JSON`, `utf8 {"a": [1, 2]}`},
	{"l", "[1, 2, NULL]", "[1, 2, NULL]", "[1,2,null]", "[1, 2, NULL] INTEGER[]", "list<l: int32, nullable> [1,2,null]"},
	{"arr", "[1, 2, 3]::INTEGER[3]", "[1, 2, 3]", "[1,2,3]", "[1, 2, 3] INTEGER[]", "fixed_size_list<: int32, nullable>[3] [1,2,3]"},
	{"st", "{'a': 1, 'b': 'x y'}", "{'a': 1, 'b': x y}", `{"a":1,"b":"x y"}`, "{'a': 1, 'b': x y} STRUCT(a INTEGER, b VARCHAR)", `struct<a: int32, b: utf8> {"a":1,"b":"x y"}`},
	{"m", "MAP {'k': 1.5}", "{k=1.5}", `{"k":1.5}`, "{k=1.5} MAP(VARCHAR, DECIMAL(2,1))", `map<utf8, decimal(2, 1), items_nullable> [{"key":"k","value":"1.5"}]`},
	// Parquet wrote a struct with an unnamed tag.
	{"un", "union_value(n := 3)::UNION(n INTEGER, s VARCHAR)", "3", `{"n":3}`, `!column "un" is UNION("n" INTEGER, "s" VARCHAR): Parquet has no union type; cast it: CAST("un" AS VARCHAR)`,
		"sparse_union<n: type=int32, nullable=0, s: type=utf8, nullable=1> [0,3]"},
	{"g", "'POINT(1 2)'::GEOMETRY", "POINT (1 2)", `"POINT (1 2)"`, "POINT (1 2) GEOMETRY('OGC:CRS84')", "binary AQEAAAAAAAAAAADwPwAAAAAAAABA"},
	// Arrow cannot take a VARIANT at all.
	{"v", "{'a': [1, 2]}::VARIANT", "{'a': [1, 2]}", `"{'a': [1, 2]}"`, "{'a': [1, 2]} VARIANT", "utf8 {'a': [1, 2]}"},
	// Inside a list, struct or map.
	{"lh", "[1::HUGEINT]", "[1]", "[1]", `!column "lh" is HUGEINT[]: Parquet has no 128-bit integer, and inside a list, struct or map forklab cannot make them DECIMAL(38,0) for you; cast it: CAST("lh" AS DECIMAL(38,0)[])`,
		`!cast it: CAST("lh" AS DECIMAL(38,0)[])`},
	{"ln", "[1.5, 'nan'::DOUBLE]", "[1.5, nan]", `!column "ln" holds [1.5, nan], with NaN or infinity, which JSON has no number for; cast it to write such values as text: CAST("ln" AS VARCHAR[])`,
		"[1.5, nan] DOUBLE[]", `list<l: float64, nullable> [1.5,"NaN"]`},
	{"sd", "{'when': 'infinity'::DATE, 'x': 1}", "{'when': infinity, 'x': 1}", `{"when":"infinity","x":1}`, `!cast it to write such values as text: CAST("sd" AS STRUCT("when" VARCHAR, "x" INTEGER))`,
		`!column "sd" holds {'when': infinity, 'x': 1}`},
	{"lb", "['01'::BIT]", "[01]", `["01"]`, "[01] VARCHAR[]", `!column "lb" is BIT[]: inside a list, struct or map Arrow would get DuckDB's internal bytes for BIT, BIGNUM and VARIANT; cast it: CAST("lb" AS VARCHAR[])`},
	{"stz", "{'x': '12:00:00+01'::TIMETZ}", "{'x': '12:00:00+01'}", `{"x":"12:00:00+01"}`, `!CAST("stz" AS STRUCT("x" VARCHAR))`, `!CAST("stz" AS STRUCT("x" VARCHAR))`},
}

// typeQuery selects cases as columns: one row of values, then one of
// NULLs.
func typeQuery(cases []typeCase) string {
	vals := make([]string, len(cases))
	nulls := make([]string, len(cases))
	for i, c := range cases {
		vals[i] = c.expr + " AS " + quoteIdent(c.name)
		nulls[i] = "NULL"
	}
	return "SELECT * EXCLUDE (forklab_row) FROM (\n  SELECT " + strings.Join(vals, ",\n  ") + ", 1 AS forklab_row\n  UNION ALL SELECT " + strings.Join(nulls, ", ") + ", 2\n) ORDER BY forklab_row"
}

func failing(s string) bool { return strings.HasPrefix(s, "!") }

// align is the table format's layout: columns two spaces apart by rune
// count, the last unpadded.
func align(rows [][]string) string {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]+2-utf8.RuneCountInString(c)))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func csvField(s string) string {
	if s == "" || strings.ContainsAny(s, ",\"\n\r") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// Every type comes out exact in every format, or is refused naming the
// column and the cast to use.
func TestExactTypeMatrix(t *testing.T) {
	db := seedResults(t)

	// table and csv: DuckDB's text.
	var head, vals, nulls, csvHead, csvVals, csvNulls []string
	for _, c := range typeCases {
		head, vals, nulls = append(head, c.name), append(vals, c.text), append(nulls, "NULL")
		csvHead, csvVals, csvNulls = append(csvHead, c.name), append(csvVals, csvField(c.text)), append(csvNulls, "")
	}
	got, err := runSQL(t, db, typeQuery(typeCases), Options{Format: Table})
	if want := align([][]string{head, vals, nulls}); err != nil || got != want {
		t.Errorf("table: %v\n%s\nwant\n%s", err, got, want)
	}
	got, err = runSQL(t, db, typeQuery(typeCases), Options{Format: CSV})
	if want := strings.Join(csvHead, ",") + "\n" + strings.Join(csvVals, ",") + "\n" + strings.Join(csvNulls, ",") + "\n"; err != nil || got != want {
		t.Errorf("csv: %v\n%q\nwant\n%q", err, got, want)
	}

	for _, f := range []Format{JSON, NDJSON} {
		var ok []typeCase
		for _, c := range typeCases {
			if !failing(c.json) {
				ok = append(ok, c)
			}
		}
		got, err := runSQL(t, db, typeQuery(ok), Options{Format: f})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var rows []map[string]json.RawMessage
		if f == JSON {
			err = json.Unmarshal([]byte(got), &rows)
		} else {
			for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
				var r map[string]json.RawMessage
				if err = json.Unmarshal([]byte(line), &r); err != nil {
					break
				}
				rows = append(rows, r)
			}
		}
		if err != nil || len(rows) != 2 {
			t.Fatalf("%s is not valid JSON with two rows (%v):\n%s", f, err, got)
		}
		for _, c := range ok {
			if v := string(rows[0][c.name]); v != c.json {
				t.Errorf("%s %s = %s, want %s", f, c.name, v, c.json)
			}
			if v := string(rows[1][c.name]); v != "null" {
				t.Errorf("%s %s NULL = %s, want null", f, c.name, v)
			}
		}
	}

	dir := t.TempDir()
	var ok []typeCase
	for _, c := range typeCases {
		if !failing(c.parquet) {
			ok = append(ok, c)
		}
	}
	pq := filepath.Join(dir, "types.parquet")
	if _, err := runSQL(t, db, typeQuery(ok), Options{Format: Parquet, Out: pq}); err != nil {
		t.Fatalf("parquet: %v", err)
	}
	back := duckRows(t, "FROM read_parquet("+quote(pq)+")")
	var types []string
	for _, r := range duckRows(t, "SELECT column_type FROM (DESCRIBE FROM read_parquet("+quote(pq)+"))") {
		types = append(types, r[0])
	}
	if len(back) != 2 {
		t.Fatalf("parquet read back %d rows, want 2", len(back))
	}
	cells, nullCells := back[0], back[1]
	if len(cells) != len(ok) || len(types) != len(ok) {
		t.Fatalf("parquet read back %d columns, %d types; want %d", len(cells), len(types), len(ok))
	}
	for i, c := range ok {
		if got := cells[i] + " " + types[i]; got != c.parquet {
			t.Errorf("parquet %s = %q, want %q", c.name, got, c.parquet)
		}
		if nullCells[i] != "NULL" {
			t.Errorf("parquet %s NULL = %q", c.name, nullCells[i])
		}
	}

	if ArrowAvailable {
		for _, f := range []Format{Arrow, ArrowStream} {
			var ok []typeCase
			for _, c := range typeCases {
				if !failing(c.arrow) {
					ok = append(ok, c)
				}
			}
			out := filepath.Join(dir, "types."+string(f))
			if _, err := runSQL(t, db, typeQuery(ok), Options{Format: f, Out: out}); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			schema, recs := readArrow(t, out, f == Arrow)
			if len(schema.Fields()) != len(ok) {
				t.Fatalf("%s: %d columns, want %d", f, len(schema.Fields()), len(ok))
			}
			var rows int64
			for _, r := range recs {
				rows += r.NumRows()
			}
			if len(recs) != 1 || rows != 2 {
				t.Fatalf("%s: %d batches, %d rows; want one batch of 2", f, len(recs), rows)
			}
			for i, c := range ok {
				col := recs[0].Column(i)
				if got := schema.Field(i).Type.String() + " " + col.ValueStr(0); got != c.arrow {
					t.Errorf("%s %s = %q, want %q", f, c.name, got, c.arrow)
				}
				// A union has no nulls of its own: a NULL is a null member.
				if !col.IsNull(1) && !(col.DataType().ID() == arrow.SPARSE_UNION && col.ValueStr(1) == "(null)") {
					t.Errorf("%s %s: row 2 is %s, not NULL", f, c.name, col.ValueStr(1))
				}
			}
		}
	}

	// Each value a format cannot hold, alone: the error names the column
	// and the cast; nothing is written.
	for _, c := range typeCases {
		for _, fe := range []struct {
			f    Format
			want string
		}{{JSON, c.json}, {NDJSON, c.json}, {Parquet, c.parquet}, {Arrow, c.arrow}, {ArrowStream, c.arrow}} {
			if !failing(fe.want) || (!ArrowAvailable && (fe.f == Arrow || fe.f == ArrowStream)) {
				continue
			}
			out := filepath.Join(dir, c.name+"."+string(fe.f))
			_, err := runSQL(t, db, typeQuery([]typeCase{c}), Options{Format: fe.f, Out: out})
			if err == nil || !BadInput(err) || !strings.Contains(err.Error(), fe.want[1:]) || !strings.Contains(err.Error(), `"`+c.name+`"`) {
				t.Errorf("%s %s: %v\nwant an error with %q", fe.f, c.name, err, fe.want[1:])
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s %s: a refused result left %s", fe.f, c.name, out)
			}
		}
	}
}

func readArrow(t *testing.T, path string, file bool) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	if file {
		r, err := ipc.NewFileReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < r.NumRecords(); i++ {
			rec, err := r.RecordBatch(i)
			if err != nil {
				t.Fatal(err)
			}
			rec.Retain()
			recs = append(recs, rec)
		}
		return r.Schema(), recs
	}
	r, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	return r.Schema(), recs
}
