package export

import (
	"fmt"
	"sort"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
)

// Exactness. DuckDB's writers are exact for most types, but not all:
//
//   - Parquet has no 128-bit integer, so COPY writes HUGEINT and UHUGEINT
//     as DOUBLE (a sum of 18014398509481987 becomes 18014398509481988);
//     it writes TIME WITH TIME ZONE shifted to UTC without its offset, a
//     UNION as a struct with an unnamed tag, an INTERVAL as unsigned
//     milliseconds (dropping microseconds, wrapping past 49.7 days, and
//     refusing negative parts), and ±infinity dates and timestamps as
//     sentinels that other readers take for years like 5881580.
//   - Arrow has the same 128-bit and infinity limits; DuckDB reads UHUGEINT
//     values above 2^127 as negative decimals, drops a TIMETZ offset without
//     shifting the time, and gives BIT and BIGNUM as DuckDB's internal bytes;
//     VARIANT it cannot convert at all.
//   - JSON has no number for NaN or ±infinity: DuckDB writes NaN and
//     Infinity, which JSON parsers refuse.
//
// exactColumns fixes what has an exact equivalent (HUGEINT and UHUGEINT to
// DECIMAL(38,0); for Arrow BIT, BIGNUM and VARIANT to their text), checks
// the values that may not fit when the rows are written (an error() in the
// query names the column, the value and the cast to use), and refuses
// outright, before anything is written, the types that never fit.

// exact is how a result's columns go out exactly in a format: a select
// list over a relation whose columns are taken by position (#1, #2, …),
// and a condition that fails the query (with DuckDB's error()) on a value
// the format cannot hold. A condition is a filter rather than a CASE
// around the column because DuckDB has no CASE of ARRAY values; it never
// drops a row.
type exact struct {
	list  string // "" for every column as it is
	where string // "" for no check
}

// none reports an exact that changes nothing.
func (e exact) none() bool { return e.list == "" && e.where == "" }

// query returns the query that selects from (a subquery or table
// expression), with the extra condition cond ("" for none).
func (e exact) query(from, cond string) string {
	list := e.list
	if list == "" {
		list = "*"
	}
	var conds []string
	for _, c := range []string{cond, e.where} {
		if c != "" {
			conds = append(conds, c)
		}
	}
	q := "SELECT " + list + " FROM " + from
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	return q
}

// exactColumns returns how the columns cols, of types types, go out
// exactly in format f. Table renders every column as DuckDB's own text
// (CAST AS VARCHAR). Errors: a column whose type f cannot hold, naming
// the column and the cast that makes it fit.
func exactColumns(f Format, cols []string, types []duckdb.TypeInfo) (exact, error) {
	parts := make([]string, len(cols))
	var checks []string
	changed := false
	for i := range cols {
		ref := fmt.Sprintf("#%d", i+1)
		expr := ref
		if f == Table {
			expr = "CAST(" + ref + " AS VARCHAR)"
		} else if i < len(types) && types[i] != nil {
			var check string
			var err error
			if expr, check, err = exactColumn(f, cols[i], ref, types[i]); err != nil {
				return exact{}, err
			}
			if check != "" {
				checks = append(checks, check)
			}
		}
		changed = changed || expr != ref
		parts[i] = expr + " AS " + quoteIdent(cols[i])
	}
	var e exact
	if changed {
		e.list = strings.Join(parts, ", ")
	}
	e.where = strings.Join(checks, " AND ")
	return e, nil
}

// wrapExact returns the query that gives stmt's rows exactly in format f
// (exactColumns over stmt as a subquery), or stmt when nothing changes.
func wrapExact(f Format, stmt string, sh shape) (string, error) {
	e, err := exactColumns(f, sh.cols, sh.types)
	if err != nil || e.none() {
		return stmt, err
	}
	return e.query("(\n"+stmt+"\n) AS forklab_q", ""), nil
}

// Kinds of value a format cannot hold exactly.
const (
	kindHuge     = "huge"     // HUGEINT, UHUGEINT
	kindTimeTZ   = "timetz"   // TIME WITH TIME ZONE
	kindUnion    = "union"    // UNION
	kindText     = "text"     // BIT, BIGNUM, VARIANT (Arrow)
	kindNaN      = "nan"      // NaN, ±infinity floats (JSON)
	kindInfinite = "infinite" // ±infinity dates and timestamps
	kindInterval = "interval" // INTERVAL (Parquet)
)

// exactColumn returns the expression that writes column name (at ref, of
// type t) exactly in format f, and the condition its values must meet
// ("" for none).
func exactColumn(f Format, name, ref string, t duckdb.TypeInfo) (expr, check string, err error) {
	binary := f == Parquet || f == Arrow || f == ArrowStream
	format := "Parquet"
	if f != Parquet {
		format = "Arrow"
	}
	switch tt := t.InternalType(); {
	case binary && (tt == duckdb.TYPE_HUGEINT || tt == duckdb.TYPE_UHUGEINT):
		// DECIMAL(38,0) holds every value of up to 38 digits exactly.
		lo := "-99999999999999999999999999999999999999"
		if tt == duckdb.TYPE_UHUGEINT {
			lo = "0"
		}
		fail := errorCall("column "+quoteIdent(name)+" holds ", "CAST("+ref+" AS VARCHAR)",
			fmt.Sprintf(", which has more than 38 digits: %s holds %s exactly only as DECIMAL(38,0); cast it to VARCHAR (CAST(%s AS VARCHAR))",
				format, typeString(t, nil), quoteIdent(name)))
		return fmt.Sprintf("CASE WHEN %[1]s IS NULL OR %[1]s BETWEEN %[2]s AND 99999999999999999999999999999999999999 THEN CAST(%[1]s AS DECIMAL(38,0)) ELSE %[3]s END",
			ref, lo, fail), "", nil
	case (f == Arrow || f == ArrowStream) && (tt == duckdb.TYPE_BIT || tt == duckdb.TYPE_BIGNUM || tt == duckdb.TYPE_VARIANT):
		return "CAST(" + ref + " AS VARCHAR)", "", nil
	}
	if kinds := refusedKinds(f, t, 0); len(kinds) > 0 {
		why := []string{}
		for _, k := range kinds {
			why = append(why, refusedWhy(k, format))
		}
		return "", "", inputErr{fmt.Errorf("column %s is %s: %s; cast it: CAST(%s AS %s)",
			quoteIdent(name), typeString(t, nil), strings.Join(why, "; "), quoteIdent(name), typeString(t, replacement(f)))}
	}
	c := checker{f: f, kinds: map[string]bool{}}
	cond := c.cond(ref, t, 0)
	if cond == "" {
		return ref, "", nil
	}
	var why []string
	for _, k := range c.sorted() {
		why = append(why, checkedWhy(k, format))
	}
	cast := "CAST(" + quoteIdent(name) + " AS " + typeString(t, func(t duckdb.TypeInfo) string {
		if c.kinds[kindOf(f, t)] {
			return "VARCHAR"
		}
		return ""
	}) + ")"
	fail := errorCall("column "+quoteIdent(name)+" holds ", "left(CAST("+ref+" AS VARCHAR), 80)",
		", with "+strings.Join(why, "; ")+"; cast it to write such values as text: "+cast)
	return ref, fmt.Sprintf("CASE WHEN %s THEN true ELSE %s END", cond, fail), nil
}

// errorCall is a call of DuckDB's error(), which fails the query with the
// message prefix, the value of the SQL expression value, and suffix.
func errorCall(prefix, value, suffix string) string {
	return "error(" + quote(prefix) + " || " + value + " || " + quote(suffix) + ")"
}

// refusedKinds lists the kinds of value in t (at depth 0 the column
// itself) that format f never holds exactly, whatever the values.
func refusedKinds(f Format, t duckdb.TypeInfo, depth int) []string {
	set := map[string]bool{}
	var walk func(t duckdb.TypeInfo, depth int)
	walk = func(t duckdb.TypeInfo, depth int) {
		switch tt := t.InternalType(); {
		case f == Parquet && (tt == duckdb.TYPE_TIME_TZ || tt == duckdb.TYPE_UNION):
			set[kindOf(f, t)] = true
		case (f == Arrow || f == ArrowStream) && tt == duckdb.TYPE_TIME_TZ:
			set[kindTimeTZ] = true
		case depth > 0 && (f == Parquet || f == Arrow || f == ArrowStream) && (tt == duckdb.TYPE_HUGEINT || tt == duckdb.TYPE_UHUGEINT):
			set[kindHuge] = true
		case depth > 0 && (f == Arrow || f == ArrowStream) && (tt == duckdb.TYPE_BIT || tt == duckdb.TYPE_BIGNUM || tt == duckdb.TYPE_VARIANT):
			set[kindText] = true
		}
		for _, c := range children(t) {
			walk(c, depth+1)
		}
	}
	walk(t, depth)
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// kindOf is the kind of a type that f refuses, "" for others.
func kindOf(f Format, t duckdb.TypeInfo) string {
	switch t.InternalType() {
	case duckdb.TYPE_HUGEINT, duckdb.TYPE_UHUGEINT:
		return kindHuge
	case duckdb.TYPE_TIME_TZ:
		return kindTimeTZ
	case duckdb.TYPE_UNION:
		return kindUnion
	case duckdb.TYPE_BIT, duckdb.TYPE_BIGNUM, duckdb.TYPE_VARIANT:
		return kindText
	case duckdb.TYPE_FLOAT, duckdb.TYPE_DOUBLE:
		return kindNaN
	case duckdb.TYPE_DATE, duckdb.TYPE_TIMESTAMP, duckdb.TYPE_TIMESTAMP_S, duckdb.TYPE_TIMESTAMP_MS,
		duckdb.TYPE_TIMESTAMP_NS, duckdb.TYPE_TIMESTAMP_TZ:
		return kindInfinite
	case duckdb.TYPE_INTERVAL:
		return kindInterval
	}
	return ""
}

// replacement is the type a refused kind is cast to in the cast an error
// suggests: DECIMAL(38,0) for 128-bit integers, VARCHAR for the others.
func replacement(f Format) func(duckdb.TypeInfo) string {
	return func(t duckdb.TypeInfo) string {
		switch kindOf(f, t) {
		case kindHuge:
			return "DECIMAL(38,0)"
		case kindTimeTZ, kindUnion, kindText:
			return "VARCHAR"
		}
		return ""
	}
}

func refusedWhy(kind, format string) string {
	switch kind {
	case kindHuge:
		return format + " has no 128-bit integer, and inside a list, struct or map forklab cannot make them DECIMAL(38,0) for you"
	case kindTimeTZ:
		return format + " keeps no time zone offset with a time of day"
	case kindUnion:
		return format + " has no union type"
	case kindText:
		return "inside a list, struct or map " + format + " would get DuckDB's internal bytes for BIT, BIGNUM and VARIANT"
	}
	return kind
}

func checkedWhy(kind, format string) string {
	switch kind {
	case kindNaN:
		return "NaN or infinity, which JSON has no number for"
	case kindInfinite:
		return "infinity in a date or timestamp, which " + format + " has no value for (other readers would see a year such as 5881580)"
	case kindInterval:
		return "an interval " + format + " cannot hold exactly (its INTERVAL keeps months, days and milliseconds, none negative, milliseconds below 2^32)"
	}
	return kind
}

// checker builds the condition that a value holds nothing format f cannot
// write exactly, recording the kinds it checks.
type checker struct {
	f     Format
	kinds map[string]bool
}

func (c *checker) sorted() []string {
	var out []string
	for k := range c.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// cond returns a SQL condition, true (never NULL) when x of type t can be
// written exactly, or "" when every value of t can.
func (c *checker) cond(x string, t duckdb.TypeInfo, depth int) string {
	json := c.f == JSON || c.f == NDJSON
	binary := c.f == Parquet || c.f == Arrow || c.f == ArrowStream
	switch tt := t.InternalType(); tt {
	case duckdb.TYPE_FLOAT, duckdb.TYPE_DOUBLE:
		if json {
			c.kinds[kindNaN] = true
			return fmt.Sprintf("(%[1]s IS NULL OR isfinite(%[1]s))", x)
		}
	case duckdb.TYPE_DATE, duckdb.TYPE_TIMESTAMP, duckdb.TYPE_TIMESTAMP_S, duckdb.TYPE_TIMESTAMP_MS,
		duckdb.TYPE_TIMESTAMP_NS, duckdb.TYPE_TIMESTAMP_TZ:
		if binary {
			c.kinds[kindInfinite] = true
			return fmt.Sprintf("(%[1]s IS NULL OR isfinite(%[1]s))", x)
		}
	case duckdb.TYPE_INTERVAL:
		if c.f == Parquet {
			c.kinds[kindInterval] = true
			us := fmt.Sprintf("(datepart('hour', %[1]s) * 3600000000 + datepart('minute', %[1]s) * 60000000 + datepart('microseconds', %[1]s))", x)
			return fmt.Sprintf("(%[1]s IS NULL OR (datepart('year', %[1]s) * 12 + datepart('month', %[1]s) >= 0 AND datepart('day', %[1]s) >= 0 AND %[2]s >= 0 AND %[2]s < 4294967296000 AND %[2]s %% 1000 = 0))", x, us)
		}
	case duckdb.TYPE_LIST, duckdb.TYPE_ARRAY:
		v := fmt.Sprintf("forklab_e%d", depth)
		if inner := c.cond(v, children(t)[0], depth+1); inner != "" {
			return fmt.Sprintf("coalesce(list_bool_and(list_transform(%s, lambda %s: %s)), true)", x, v, inner)
		}
	case duckdb.TYPE_MAP:
		d := t.Details().(*duckdb.MapDetails)
		var conds []string
		v := fmt.Sprintf("forklab_e%d", depth)
		// JSON writes map keys as object keys, which are text.
		if !json {
			if inner := c.cond(v, d.Key, depth+1); inner != "" {
				conds = append(conds, fmt.Sprintf("coalesce(list_bool_and(list_transform(map_keys(%s), lambda %s: %s)), true)", x, v, inner))
			}
		}
		if inner := c.cond(v, d.Value, depth+1); inner != "" {
			conds = append(conds, fmt.Sprintf("coalesce(list_bool_and(list_transform(map_values(%s), lambda %s: %s)), true)", x, v, inner))
		}
		return strings.Join(conds, " AND ")
	case duckdb.TYPE_STRUCT:
		var conds []string
		for _, e := range t.Details().(*duckdb.StructDetails).Entries {
			if inner := c.cond(fmt.Sprintf("struct_extract(%s, %s)", x, quote(e.Name())), e.Info(), depth+1); inner != "" {
				conds = append(conds, inner)
			}
		}
		if len(conds) > 0 {
			return "(" + strings.Join(conds, " AND ") + ")"
		}
	case duckdb.TYPE_UNION:
		var conds []string
		for _, m := range t.Details().(*duckdb.UnionDetails).Members {
			if inner := c.cond(fmt.Sprintf("union_extract(%s, %s)", x, quote(m.Name)), m.Type, depth+1); inner != "" {
				conds = append(conds, inner)
			}
		}
		if len(conds) > 0 {
			return "(" + strings.Join(conds, " AND ") + ")"
		}
	}
	return ""
}

// children are the types a nested type holds.
func children(t duckdb.TypeInfo) []duckdb.TypeInfo {
	switch d := t.Details().(type) {
	case *duckdb.ListDetails:
		return []duckdb.TypeInfo{d.Child}
	case *duckdb.ArrayDetails:
		return []duckdb.TypeInfo{d.Child}
	case *duckdb.MapDetails:
		return []duckdb.TypeInfo{d.Key, d.Value}
	case *duckdb.StructDetails:
		var out []duckdb.TypeInfo
		for _, e := range d.Entries {
			out = append(out, e.Info())
		}
		return out
	case *duckdb.UnionDetails:
		var out []duckdb.TypeInfo
		for _, m := range d.Members {
			out = append(out, m.Type)
		}
		return out
	}
	return nil
}

// typeNames are DuckDB's names of the types without parameters.
var typeNames = map[duckdb.Type]string{
	duckdb.TYPE_BOOLEAN: "BOOLEAN", duckdb.TYPE_TINYINT: "TINYINT", duckdb.TYPE_SMALLINT: "SMALLINT",
	duckdb.TYPE_INTEGER: "INTEGER", duckdb.TYPE_BIGINT: "BIGINT", duckdb.TYPE_UTINYINT: "UTINYINT",
	duckdb.TYPE_USMALLINT: "USMALLINT", duckdb.TYPE_UINTEGER: "UINTEGER", duckdb.TYPE_UBIGINT: "UBIGINT",
	duckdb.TYPE_FLOAT: "FLOAT", duckdb.TYPE_DOUBLE: "DOUBLE", duckdb.TYPE_TIMESTAMP: "TIMESTAMP",
	duckdb.TYPE_DATE: "DATE", duckdb.TYPE_TIME: "TIME", duckdb.TYPE_INTERVAL: "INTERVAL",
	duckdb.TYPE_HUGEINT: "HUGEINT", duckdb.TYPE_UHUGEINT: "UHUGEINT", duckdb.TYPE_VARCHAR: "VARCHAR",
	duckdb.TYPE_BLOB: "BLOB", duckdb.TYPE_TIMESTAMP_S: "TIMESTAMP_S", duckdb.TYPE_TIMESTAMP_MS: "TIMESTAMP_MS",
	duckdb.TYPE_TIMESTAMP_NS: "TIMESTAMP_NS", duckdb.TYPE_UUID: "UUID", duckdb.TYPE_BIT: "BIT",
	duckdb.TYPE_TIME_TZ: "TIME WITH TIME ZONE", duckdb.TYPE_TIMESTAMP_TZ: "TIMESTAMP WITH TIME ZONE",
	duckdb.TYPE_BIGNUM: "BIGNUM", duckdb.TYPE_SQLNULL: "NULL", duckdb.TYPE_GEOMETRY: "GEOMETRY",
	duckdb.TYPE_VARIANT: "VARIANT",
}

// typeString is t as DuckDB writes a type, with each type for which
// replace returns a name written as that name instead (replace may be
// nil).
func typeString(t duckdb.TypeInfo, replace func(duckdb.TypeInfo) string) string {
	if replace != nil {
		if r := replace(t); r != "" {
			return r
		}
	}
	if t.Alias() != "" {
		return t.Alias()
	}
	switch d := t.Details().(type) {
	case *duckdb.DecimalDetails:
		return fmt.Sprintf("DECIMAL(%d,%d)", d.Width, d.Scale)
	case *duckdb.EnumDetails:
		vals := make([]string, len(d.Values))
		for i, v := range d.Values {
			vals[i] = quote(v)
		}
		return "ENUM(" + strings.Join(vals, ", ") + ")"
	case *duckdb.ListDetails:
		return typeString(d.Child, replace) + "[]"
	case *duckdb.ArrayDetails:
		return fmt.Sprintf("%s[%d]", typeString(d.Child, replace), d.Size)
	case *duckdb.MapDetails:
		return "MAP(" + typeString(d.Key, replace) + ", " + typeString(d.Value, replace) + ")"
	case *duckdb.StructDetails:
		parts := make([]string, len(d.Entries))
		for i, e := range d.Entries {
			parts[i] = quoteIdent(e.Name()) + " " + typeString(e.Info(), replace)
		}
		return "STRUCT(" + strings.Join(parts, ", ") + ")"
	case *duckdb.UnionDetails:
		parts := make([]string, len(d.Members))
		for i, m := range d.Members {
			parts[i] = quoteIdent(m.Name) + " " + typeString(m.Type, replace)
		}
		return "UNION(" + strings.Join(parts, ", ") + ")"
	}
	if n, ok := typeNames[t.InternalType()]; ok {
		return n
	}
	if t.InternalType() == 39 { // TIME_NS: duckdb-go has no constant for it yet
		return "TIME_NS"
	}
	return fmt.Sprintf("type %d", t.InternalType())
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
