package queries

import (
	"fmt"
	"math"
	"strings"

	"github.com/forklab/forklab/pipeline/world"
)

// Bucketing of numeric features, for slices and policy triggers.
const (
	// MaxValues bounds the int features sliced value by value: those
	// whose values span at most MaxValues integers (max - min < MaxValues).
	MaxValues = 12
	// Buckets is the number of quantile buckets of any other numeric
	// feature: edges at its deciles (equal edges merge, so there may be
	// fewer).
	Buckets = 10
	// Digits is how many significant digits such a feature's values keep
	// (truncated towards minus infinity) before they are counted: its
	// bucket edges have that many, and the one pass over the pairs groups
	// at most a few thousand values of it, however many the runs took.
	Digits = 3
)

// View is one view over a results directory of schema version 2 (the
// layout of V2-LAYOUT.md and schemas/README.md).
type View struct {
	// Name is the view's name.
	Name string
	// Comment says what one row is (COMMENT ON VIEW in results.duckdb).
	Comment string
	// Select is the view's query. Base views read the Parquet folders by
	// paths relative to the results directory; the others read views only.
	Select string
	// Base marks the views that read files: configs, params, tasks,
	// checkpoints, branches and the raw pairs. A caller that guards file
	// access (or a test that makes the tables itself) may replace them.
	Base bool
}

// ViewDefs returns the views of a results directory whose world is
// declared by d, in creation order (each reads only files or views before
// it):
//
//   - configs, params, tasks, checkpoints, branches: the tables as stored,
//     partition columns (config_id, fork_step) first; pair_rows: the pairs
//     files the same way;
//   - config_params: one row per configuration, its declared scalar
//     parameters pivoted into typed columns (list parameters as their
//     canonical text);
//   - pairs: pair_rows with the configuration's parameters as columns, so
//     a grid slices without a join and the seed's query `SELECT same_obs,
//     label, count(*) FROM pairs GROUP BY ALL` works unchanged on a
//     counter sweep;
//   - features and hidden: long, one row per ok checkpoint and declared
//     feature (hidden field): config_id, fork_step, seed, feature, type,
//     value_num (bool as 0/1, numbers as themselves, NULL for enums),
//     value_text (canonical text);
//   - feature_catalog: feature_order, feature, type, enum_values,
//     description, from the declaration;
//   - pair_groups: the one pass over the pairs the report's queries share:
//     pairs counted once per configuration, fork step, arm, status, side
//     of the split (held_out), quadrant, fault flag and feature values (a
//     wide int or a float truncated to Digits significant digits), with
//     their extra costs summed exactly;
//   - pair_counts: the pairs counted per configuration, fork step, arm,
//     status and quadrant, and nothing else: the summary's input, one
//     short pass over five narrow columns where pair_groups hashes every
//     feature and sums the costs exactly (results.DB.Materialize derives
//     it from pair_groups instead);
//   - feature_ranges: for each int feature, whether its values span fewer
//     than MaxValues integers, from the files' column statistics;
//   - feature_values, feature_bins: how often each numeric feature took
//     each value, and so how each feature is bucketed (by value, or at
//     its deciles, values truncated to Digits significant digits);
//   - pair_cells: pair_groups with each feature replaced by its bucket
//     (the list profile, in declaration order), split and label spelt
//     out: the small table slices, the policy search, the Qini curve and
//     the costs read;
//   - score_counts, score_cells: for a world that declares a score, the ok
//     pairs counted per score difference (score_diff), by configuration,
//     fork step and arm, and by bucket profile too: the frequency tables
//     the summary's and the slices' mean difference, paired t interval
//     and Wilcoxon test read (pair_groups then counts by score_diff too);
//     empty for a pass/fail world;
//   - feature_buckets: each bucket present, its label and edges.
//
// Only the generated views (the file views, config_params, features,
// hidden, feature_catalog, feature_ranges, pair_groups, feature_values,
// pair_cells, score_counts, score_cells) depend on the declaration; the queries of this package read them and nothing
// world-specific. pair_groups reads every pair; a caller running several
// queries materialises it once (CREATE TEMP TABLE pair_groups AS FROM
// main.pair_groups shadows the view; see results.DB.Prepare).
//
// It fails if d is not a valid declaration.
func ViewDefs(d world.Declaration) ([]View, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	g := gen{d: d}
	return []View{
		{Name: "configs", Base: true, Comment: "one row per configuration: world, world_version, params (JSON), model",
			Select: "SELECT * FROM read_parquet('configs/*.parquet')"},
		{Name: "params", Base: true, Comment: "one row per configuration and world parameter: type, value_num, value_text",
			Select: "SELECT * FROM read_parquet('params/*.parquet')"},
		{Name: "tasks", Base: true, Comment: "one row per (configuration, seed): the task the seed draws",
			Select: g.files("tasks/*/*.parquet", false, g.taskColumns())},
		{Name: "checkpoints", Base: true, Comment: "one row per (configuration, fork step, seed): the run at the fork, its features, hidden truth, cost so far and checkpoint JSON",
			Select: g.files("checkpoints/*/*/*.parquet", true, g.checkpointColumns())},
		{Name: "branches", Base: true, Comment: "one row per (configuration, fork step, seed, arm, replica): one finished branch and its cost",
			Select: g.files("branches/*/*/*.parquet", true, g.branchColumns())},
		{Name: "pair_rows", Base: true, Comment: "the pairs files as stored, partition columns first (pairs adds the configuration's parameters)",
			Select: g.files("pairs/*/*/*.parquet", true, g.pairColumns())},
		{Name: "config_params", Comment: "one row per configuration: its scalar world parameters as typed columns, list parameters as text",
			Select: g.configParams()},
		{Name: "pairs", Comment: "one row per (configuration, fork step, seed, treatment arm): the arm against off, labelled, with the features, hidden truth, extra cost and the configuration's parameters",
			Select: "SELECT p.*, c.* EXCLUDE (config_id)\nFROM pair_rows AS p\nJOIN config_params AS c USING (config_id)"},
		{Name: "features", Comment: "one row per ok checkpoint and declared feature: value_num (bool 0/1), value_text",
			Select: g.long("checkpoints", d.Features, "")},
		{Name: "hidden", Comment: "one row per ok checkpoint and hidden field (named without hidden_): value_num, value_text",
			Select: g.long("checkpoints", d.Hidden, "hidden_")},
		{Name: "feature_catalog", Comment: "one row per declared feature: feature_order, feature, type, enum_values, description",
			Select: g.catalog()},
		{Name: "feature_ranges", Base: true, Comment: "one row: for each int feature, whether its values span fewer than 12 integers (read from the pairs files' column statistics)",
			Select: g.ranges()},
		{Name: "pair_groups", Comment: "pairs counted once per configuration, fork step, arm, status, side of the split (held_out), quadrant, fault and feature values, with summed extra cost: the one pass over the pairs the report's queries share",
			Select: g.groups(nil)},
		{Name: "pair_counts", Comment: "pairs counted once per configuration, fork step, arm, status and quadrant: what the summary reads",
			Select: PairCounts("pair_rows", "count(*)")},
		{Name: "feature_values", Comment: "one row per numeric feature and value: how many ok pairs took it",
			Select: g.values()},
		{Name: "feature_bins", Comment: "one row per feature: how slices and triggers bucket it (by value, or quantile edges)",
			Select: featureBins},
		{Name: "pair_cells", Comment: "pair_groups with each feature replaced by its bucket (profile: the bucket keys in feature order)",
			Select: g.cells()},
		{Name: "score_counts", Comment: "ok pairs with a score counted per configuration, fork step, arm and score difference: what the summary's score statistics read (empty for a pass/fail world)",
			Select: ScoreCounts(d, "pair_rows", "count(*)")},
		{Name: "score_cells", Comment: "ok pairs with a score counted per configuration, fork step, arm, bucket profile and score difference: what the slices' score statistics read (empty for a pass/fail world)",
			Select: g.scoreCells()},
		{Name: "feature_buckets", Comment: "one row per configuration, fork step, feature and bucket present: its key, label and edges",
			Select: featureBuckets},
		{Name: "example_cells", Comment: "rescued and harmed pairs grouped as pair_cells groups them (profile: the bucket keys in feature order), with each group's first two runs (by seed, then run_id): what slice_examples reads",
			Select: g.examples()},
	}, nil
}

// Views returns ViewDefs(d) as SQL text, one CREATE OR REPLACE VIEW
// statement per view, each after a comment naming what it holds: what
// results.Open runs on every connection and what results.duckdb holds.
// The paths are relative to the results directory (DuckDB resolves them
// against file_search_path or its working directory).
func Views(d world.Declaration) (string, error) {
	vs, err := ViewDefs(d)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- Views over a results directory of world %s version %s (schema version 2),\n-- generated from its declaration by forklab (queries.Views).\n", d.Name, d.Version)
	for _, v := range vs {
		fmt.Fprintf(&b, "\n-- %s: %s\nCREATE OR REPLACE VIEW %s AS\n%s;\n", v.Name, v.Comment, v.Name, v.Select)
	}
	return b.String(), nil
}

// column is one column of a table's contract: its name and DuckDB type.
type column struct{ name, typ string }

// sqlType is the DuckDB type of a declared field.
func sqlType(k world.Kind) string {
	switch k {
	case world.Bool:
		return "BOOLEAN"
	case world.Int:
		return "BIGINT"
	case world.Float:
		return "DOUBLE"
	}
	return "VARCHAR"
}

func fields(prefix string, fs []world.Field) []column {
	cols := make([]column, len(fs))
	for i, f := range fs {
		cols[i] = column{prefix + f.Name, sqlType(f.Kind)}
	}
	return cols
}

// costColumns are the cost_<field> (or extra_<field>) columns, every cost
// field whether the world reports it or not.
func costColumns(prefix string, typ func(string) string) []column {
	var cols []column
	for _, c := range world.CostFields {
		cols = append(cols, column{prefix + c, typ(c)})
	}
	return cols
}

func costType(c string) string {
	if c == world.CostSteps || c == world.CostTokens {
		return "BIGINT"
	}
	return "DOUBLE"
}

func (g gen) taskColumns() []column {
	cols := []column{{"config_id", "INTEGER"}, {"seed", "BIGINT"}, {"run_id", "VARCHAR"}, {"status", "VARCHAR"}, {"error", "VARCHAR"}}
	cols = append(cols, fields("", g.d.Task)...)
	return append(cols, column{"metadata", "VARCHAR"})
}

func (g gen) checkpointColumns() []column {
	cols := []column{{"config_id", "INTEGER"}, {"fork_step", "INTEGER"}, {"seed", "BIGINT"}, {"run_id", "VARCHAR"}, {"status", "VARCHAR"}, {"error", "VARCHAR"}, {"over", "BOOLEAN"}}
	cols = append(cols, fields("", g.d.Features)...)
	cols = append(cols, fields("hidden_", g.d.Hidden)...)
	cols = append(cols, costColumns("cost_", costType)...)
	return append(cols, column{"checkpoint", "VARCHAR"})
}

func (g gen) branchColumns() []column {
	cols := []column{{"config_id", "INTEGER"}, {"fork_step", "INTEGER"}, {"seed", "BIGINT"}, {"run_id", "VARCHAR"}, {"arm", "VARCHAR"}, {"replica", "INTEGER"},
		{"status", "VARCHAR"}, {"error", "VARCHAR"}, {"intervened", "BOOLEAN"}, {"success", "BOOLEAN"}, {"score", "DOUBLE"}}
	cols = append(cols, costColumns("cost_", costType)...)
	return append(cols, column{"details", "VARCHAR"}, column{"transcript", "VARCHAR"})
}

func (g gen) pairColumns() []column {
	cols := []column{{"config_id", "INTEGER"}, {"fork_step", "INTEGER"}, {"seed", "BIGINT"}, {"run_id", "VARCHAR"}, {"arm", "VARCHAR"}, {"replicas", "INTEGER"},
		{"status", "VARCHAR"}, {"error", "VARCHAR"}, {"control_wins", "INTEGER"}, {"treatment_wins", "INTEGER"},
		{"control_success", "BOOLEAN"}, {"treatment_success", "BOOLEAN"}, {"label", "VARCHAR"}, {"quadrant", "VARCHAR"}, {"fault", "BOOLEAN"},
		{"score_control", "DOUBLE"}, {"score_treated", "DOUBLE"}, {"score_diff", "DOUBLE"}}
	cols = append(cols, fields("", g.d.Features)...)
	cols = append(cols, fields("hidden_", g.d.Hidden)...)
	return append(cols, costColumns("extra_", func(string) string { return "DOUBLE" })...)
}

// files reads a Hive-partitioned table folder under its contract: the
// columns of cols, in that order and of those types, whichever of them the
// files hold. A column every row of a file would leave null (an error
// column without errors, a cost field the world does not report) is left
// out of the file by the writer; the union by name with an empty relation
// of the contract's columns brings it back as NULL. Columns the files hold
// beyond the contract follow. run_id, which a seed population's files
// leave out, is the decimal seed there (RunID).
func (g gen) files(glob string, forkStep bool, cols []column) string {
	typed := make([]string, len(cols))
	for i, c := range cols {
		typed[i] = fmt.Sprintf("CAST(NULL AS %s) AS %s", c.typ, ident(c.name))
	}
	types := "{'config_id': INTEGER}"
	if forkStep {
		types = "{'config_id': INTEGER, 'fork_step': INTEGER}"
	}
	return "SELECT * REPLACE (" + RunID + " AS run_id)\nFROM (SELECT " + strings.Join(typed, ", ") + " WHERE false\nUNION ALL BY NAME\n" +
		fmt.Sprintf("SELECT * FROM read_parquet('%s', hive_partitioning = true, union_by_name = true,\n                           hive_types = %s))", glob, types)
}

// RunID is a row's run_id: a recorded run's own, or the decimal seed of a
// seed population's run, whose files leave run_id out (schemas/README.md,
// "Rows keyed by run").
const RunID = "coalesce(run_id, CAST(seed AS VARCHAR))"

type gen struct{ d world.Declaration }

// lit is a SQL string literal.
func lit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ident quotes a declared name (already [a-z][a-z0-9_]*, so quoting only
// guards against keywords).
func ident(s string) string { return `"` + s + `"` }

func (g gen) configParams() string {
	var cols []string
	for _, p := range g.d.Params {
		sel := fmt.Sprintf("FILTER (WHERE p.param = %s)", lit(p.Name))
		var e string
		switch p.Kind {
		case world.ParamInt:
			e = fmt.Sprintf("CAST(max(p.value_text) %s AS BIGINT)", sel)
		case world.ParamFloat:
			e = fmt.Sprintf("max(p.value_num) %s", sel)
		case world.ParamBool:
			e = fmt.Sprintf("max(p.value_text) %s = 'true'", sel)
		default: // enum, lists: the canonical text
			e = fmt.Sprintf("max(p.value_text) %s", sel)
		}
		cols = append(cols, fmt.Sprintf("       %s AS %s", e, ident(p.Name)))
	}
	s := "SELECT c.config_id"
	if len(cols) > 0 {
		s += ",\n" + strings.Join(cols, ",\n")
	}
	return s + "\nFROM configs AS c\nLEFT JOIN params AS p USING (config_id)\nGROUP BY c.config_id"
}

// numText is the canonical text of a DOUBLE expression: an integral value
// below 10^15 in magnitude as an integer ("3", not "3.0"), anything else
// as DuckDB writes it (the shortest text that reads back as the same
// number: "0.25", "1e-07").
func numText(x string) string {
	return fmt.Sprintf("CASE WHEN %[1]s = trunc(%[1]s) AND abs(%[1]s) < 1e15 THEN CAST(CAST(%[1]s AS BIGINT) AS VARCHAR) ELSE CAST(%[1]s AS VARCHAR) END", x)
}

// valueNum and valueText are a column's value_num and value_text in the
// long views.
func valueNum(f world.Field, col string) string {
	switch f.Kind {
	case world.Bool:
		return fmt.Sprintf("CAST(CAST(%s AS INTEGER) AS DOUBLE)", col)
	case world.Enum:
		return "CAST(NULL AS DOUBLE)"
	}
	return fmt.Sprintf("CAST(%s AS DOUBLE)", col)
}

func valueText(f world.Field, col string) string {
	switch f.Kind {
	case world.Bool, world.Enum, world.Int:
		return fmt.Sprintf("CAST(%s AS VARCHAR)", col)
	}
	return numText(fmt.Sprintf("CAST(%s AS DOUBLE)", col))
}

// long unpivots the declared fields of table (columns prefix+name) into
// rows, one scan for all of them.
func (g gen) long(table string, fs []world.Field, prefix string) string {
	if len(fs) == 0 {
		return "SELECT CAST(NULL AS INTEGER) AS config_id, CAST(NULL AS INTEGER) AS fork_step, CAST(NULL AS BIGINT) AS seed, CAST(NULL AS VARCHAR) AS run_id,\n" +
			"       CAST(NULL AS VARCHAR) AS feature, CAST(NULL AS VARCHAR) AS type, CAST(NULL AS DOUBLE) AS value_num, CAST(NULL AS VARCHAR) AS value_text\nWHERE false"
	}
	var items []string
	for _, f := range fs {
		col := ident(prefix + f.Name)
		items = append(items, fmt.Sprintf("{'feature': %s, 'type': %s, 'value_num': %s, 'value_text': %s}",
			lit(f.Name), lit(string(f.Kind)), valueNum(f, col), valueText(f, col)))
	}
	return "SELECT config_id, fork_step, seed, run_id, v.feature, v.type, v.value_num, v.value_text\n" +
		"FROM (SELECT config_id, fork_step, seed, run_id, unnest([\n           " + strings.Join(items, ",\n           ") +
		"]) AS v\n      FROM " + table + " WHERE status = 'ok')"
}

func (g gen) catalog() string {
	var rows []string
	for i, f := range g.d.Features {
		enum := "CAST(NULL AS VARCHAR[])"
		if f.Kind == world.Enum {
			vs := make([]string, len(f.Values))
			for j, v := range f.Values {
				vs[j] = lit(v)
			}
			enum = "[" + strings.Join(vs, ", ") + "]"
		}
		rows = append(rows, fmt.Sprintf("(%d, %s, %s, %s, %s)", i+1, lit(f.Name), lit(string(f.Kind)), enum, lit(f.Description)))
	}
	return "SELECT CAST(feature_order AS INTEGER) AS feature_order, feature, type, enum_values, description\nFROM (VALUES\n    " +
		strings.Join(rows, ",\n    ") + ") AS t(feature_order, feature, type, enum_values, description)"
}

// numeric reports a feature bucketed by feature_bins: int and float.
func numeric(f world.Field) bool { return f.Kind == world.Int || f.Kind == world.Float }

// heldOut is the policy search's split of the runs: a run with a seed is
// held out when ((seed × 2654435761) mod 2^32) / 2^32 < holdout (Knuth's
// multiplicative hash; variable holdout, default 0.3), a recorded run
// without one when the first 32 bits of the MD5 of its run_id, over 2^32,
// are below holdout. The split is stable across runs and the same for
// every configuration, fork step and arm; a run is on one side of it.
const heldOut = "CASE WHEN p.seed IS NOT NULL THEN ((CAST(p.seed & 4294967295 AS UBIGINT) * 2654435761) & 4294967295)\n" +
	"            ELSE CAST('0x' || substr(md5(p.run_id), 1, 8) AS UBIGINT) END < coalesce(getvariable('holdout'), 0.3) * 4294967296"

// groups is pair_groups: the one pass over the pairs every report query
// shares. Pairs with the same configuration, fork step, arm, status, side
// of the split, quadrant (which says the label too), fault flag and
// feature values are counted once, their extra costs summed. A narrow int
// keeps its values, a wide int or a float is truncated to Digits
// significant digits. narrow says which ints are narrow: nil reads it from
// feature_ranges row by row (the view); PairGroups passes what
// feature_ranges said, so the pass groups raw integers.
func (g gen) groups(narrow map[string]bool) string {
	cols, from := g.groupedFeatures(narrow)
	if g.d.Score != nil {
		// A scored world's pairs are counted by their score difference
		// too (score_counts, score_cells); pair_cells sums it away.
		cols = append(cols, "p.score_diff")
	}
	return "SELECT p.config_id, p.fork_step, p.arm, p.status,\n       " + heldOut + " AS held_out,\n" +
		"       p.quadrant, p.fault,\n       " + strings.Join(cols, ",\n       ") + ",\n" +
		"       count(*) AS n,\n" +
		"       " + exactSum("extra_steps") + ", " + exactSum("extra_tokens") + ",\n" +
		"       " + exactSum("extra_usd") + ", " + exactSum("extra_seconds") + "\n" +
		"FROM " + from + "\nGROUP BY ALL"
}

// groupedFeatures are the feature columns pair_groups groups pairs by
// (pair_rows AS p; a wide int or a float truncated to Digits significant
// digits, a narrow int as it is: narrow nil decides per row from
// feature_ranges), and the FROM clause they need.
func (g gen) groupedFeatures(narrow map[string]bool) (cols []string, from string) {
	var small []string
	for i, f := range g.d.Features {
		col := "p." + ident(f.Name)
		switch {
		case f.Kind == world.Int && narrow == nil:
			col = fmt.Sprintf("CASE WHEN r.small%d THEN CAST(%s AS DOUBLE) ELSE %s END AS %s", i+1, col, truncate("CAST("+col+" AS DOUBLE)"), ident(f.Name))
			small = append(small, fmt.Sprintf("coalesce(bool_and(small) FILTER (WHERE feature_order = %d), false) AS small%d", i+1, i+1))
		case f.Kind == world.Int && !narrow[f.Name]:
			col = truncate("CAST("+col+" AS DOUBLE)") + " AS " + ident(f.Name)
		case f.Kind == world.Float:
			col = truncate(col) + " AS " + ident(f.Name)
		}
		cols = append(cols, col)
	}
	from = "pair_rows AS p"
	if len(small) > 0 {
		from += ", (SELECT " + strings.Join(small, ", ") + " FROM feature_ranges) AS r"
	}
	return cols, from
}

// PairCounts is the query of pair_counts over from, counting pairs with
// n (count(*) over pair_rows; sum(n) over pair_groups, which
// results.DB.Materialize reads so as not to read the pairs twice).
func PairCounts(from, n string) string {
	return "SELECT config_id, fork_step, arm, status, quadrant, CAST(" + n + " AS BIGINT) AS n\n" +
		"FROM " + from + "\nGROUP BY ALL"
}

// ScoreCounts is the query of score_counts over from for world d: the ok
// pairs with a score counted per configuration, fork step, arm and score
// difference (score_diff), with n (count(*) over pair_rows; sum(n) over
// pair_groups, as results.DB.Materialize reads it): the frequency table
// the summary's mean difference, paired t interval and Wilcoxon test read.
// For a pass/fail world it is an empty relation of the same columns.
func ScoreCounts(d world.Declaration, from, n string) string {
	if d.Score == nil {
		return "SELECT CAST(NULL AS INTEGER) AS config_id, CAST(NULL AS INTEGER) AS fork_step, CAST(NULL AS VARCHAR) AS arm,\n" +
			"       CAST(NULL AS DOUBLE) AS score_diff, CAST(NULL AS BIGINT) AS n\nWHERE false"
	}
	return "SELECT config_id, fork_step, arm, score_diff, CAST(" + n + " AS BIGINT) AS n\n" +
		"FROM " + from + "\nWHERE status = 'ok' AND score_diff IS NOT NULL\nGROUP BY ALL"
}

// PairGroups returns the query of the view pair_groups for world d with
// the verdicts of feature_ranges already known (narrow: the int features
// whose values span fewer than MaxValues integers): the same rows, a
// narrow int's values grouped as the integers they are rather than through
// a CASE per row. results.DB.Materialize runs it.
func PairGroups(d world.Declaration, narrow map[string]bool) (string, error) {
	if err := d.Validate(); err != nil {
		return "", err
	}
	if narrow == nil {
		narrow = map[string]bool{}
	}
	return gen{d: d}.groups(narrow), nil
}

// truncate is x truncated towards minus infinity to Digits significant
// digits (NULL stays NULL). Since a bucket edge has Digits significant
// digits, x >= edge exactly when truncate(x) >= edge: the truncation
// changes no bucket and no trigger. The 1e-7 guards against a product
// such as 0.57 * 1000 = 569.9999999999999.
func truncate(x string) string {
	scale := fmt.Sprintf("(%d - CAST(floor(log10(abs(%s))) AS INTEGER))", Digits-1, x)
	return fmt.Sprintf("CASE WHEN %[1]s IS NULL OR %[1]s = 0 OR isinf(%[1]s) OR isnan(%[1]s) THEN %[1]s\n"+
		"                WHEN %[2]s >= 0 THEN floor(%[1]s * pow(10, %[2]s) + 1e-7) / pow(10, %[2]s)\n"+
		"                ELSE floor(%[1]s / pow(10, -%[2]s) + 1e-7) * pow(10, -%[2]s) END", x, scale)
}

// ranges is feature_ranges: one row per int feature, saying whether its
// values span fewer than MaxValues integers (small), read from the Parquet
// column statistics of the pairs files (no scan: the footers are read
// anyway). A row group without statistics where the column has values
// makes the answer false: the feature is then cut at its deciles.
func (g gen) ranges() string {
	var items []string
	for i, f := range g.d.Features {
		if f.Kind != world.Int {
			continue
		}
		c := fmt.Sprintf("path_in_schema = %s", lit(f.Name))
		items = append(items, fmt.Sprintf("{'feature_order': %[3]d, 'small':\n"+
			"               coalesce(max(TRY_CAST(stats_max_value AS DOUBLE)) FILTER (WHERE %[1]s)\n"+
			"                 - min(TRY_CAST(stats_min_value AS DOUBLE)) FILTER (WHERE %[1]s) < %[2]d, false)\n"+
			"               AND count(*) FILTER (WHERE %[1]s AND coalesce(stats_null_count, 0) < num_values\n"+
			"                   AND (TRY_CAST(stats_min_value AS DOUBLE) IS NULL OR TRY_CAST(stats_max_value AS DOUBLE) IS NULL)) = 0}",
			c, MaxValues, i+1))
	}
	if len(items) == 0 {
		return "SELECT CAST(NULL AS INTEGER) AS feature_order, CAST(NULL AS BOOLEAN) AS small WHERE false"
	}
	return "SELECT CAST(r.feature_order AS INTEGER) AS feature_order, r.small\n" +
		"FROM (SELECT unnest([" + strings.Join(items, ",\n           ") + "]) AS r\n" +
		"      FROM parquet_metadata('pairs/*/*/*.parquet'))"
}

// exactSum sums a pairs' extra cost column exactly, each value to 10^-6
// (DECIMAL(18, 6): a millionth of a step, token, dollar or second): a sum
// of doubles depends on the order DuckDB's threads add them in, and the
// same sweep would then show 24.000000000000004 one day and 24 the next.
// The queries turn the sums back into DOUBLE when they print them.
func exactSum(col string) string {
	return fmt.Sprintf("sum(CAST(p.%s AS DECIMAL(18, 6))) AS %s", col, col)
}

// values is feature_values: how many ok pairs took each value of each
// numeric feature, read from pair_groups (a wide int or a float truncated
// to Digits significant digits there).
func (g gen) values() string {
	var items []string
	for i, f := range g.d.Features {
		if numeric(f) {
			items = append(items, fmt.Sprintf("{'feature_order': %d, 'value': CAST(%s AS DOUBLE)}", i+1, ident(f.Name)))
		}
	}
	if len(items) == 0 {
		return "SELECT CAST(NULL AS INTEGER) AS feature_order, CAST(NULL AS DOUBLE) AS value, CAST(NULL AS HUGEINT) AS n WHERE false"
	}
	return "SELECT CAST(v.feature_order AS INTEGER) AS feature_order, v.value, sum(n) AS n\n" +
		"FROM (SELECT n, unnest([\n           " + strings.Join(items, ",\n           ") + "]) AS v\n" +
		"      FROM pair_groups WHERE status = 'ok')\nGROUP BY ALL"
}

// featureBins is feature_bins, generic: it reads feature_values,
// feature_catalog and feature_ranges' verdicts (through pair_groups: a
// narrow int keeps its values there). A bool or enum feature is sliced by
// value, and so is an int whose values span fewer than MaxValues integers.
// Any other numeric feature is cut at the deciles of its values over the
// ok pairs (truncated to Digits significant digits; a decile is the
// smallest value whose cumulative share reaches it, as quantile_disc); its
// buckets' lower edges are its minimum and the distinct deciles above it.
var featureBins = `WITH stats AS (
    SELECT feature_order, min(value) AS lo, max(value) AS hi, count(*) AS distinct_values, sum(n) AS total
    FROM feature_values
    WHERE value IS NOT NULL
    GROUP BY feature_order
),
cumulative AS (
    SELECT feature_order, value, sum(n) OVER (PARTITION BY feature_order ORDER BY value) AS cum
    FROM feature_values
    WHERE value IS NOT NULL
),
deciles AS (
    SELECT c.feature_order, d.i, min(c.value) AS edge
    FROM cumulative AS c
    JOIN stats AS s USING (feature_order), range(1, ` + fmt.Sprint(Buckets) + `) AS d(i)
    WHERE c.cum >= s.total * d.i / ` + fmt.Sprint(Buckets) + `
    GROUP BY c.feature_order, d.i
),
above AS (
    SELECT s.feature_order, list(DISTINCT d.edge ORDER BY d.edge) FILTER (WHERE d.edge > s.lo) AS above
    FROM stats AS s
    JOIN deciles AS d USING (feature_order)
    GROUP BY s.feature_order
),
edges AS (
    SELECT s.feature_order, s.lo, s.hi, s.distinct_values, list_prepend(s.lo, coalesce(a.above, [])) AS edges
    FROM stats AS s
    LEFT JOIN above AS a USING (feature_order)
),
-- An int is sliced by value when its values kept their digits in
-- pair_groups (feature_ranges found it narrow) or need no truncation.
by_value AS (
    SELECT c.feature_order, c.feature, c.type,
           c.type IN ('bool', 'enum') OR e.lo IS NULL
             OR (c.type = 'int' AND e.hi - e.lo < ` + fmt.Sprint(MaxValues) + `
                 AND (coalesce(r.small, false) OR greatest(abs(e.lo), abs(e.hi)) < ` + fmt.Sprintf("%g", math.Pow(10, Digits)) + `)) AS by_value
    FROM feature_catalog AS c
    LEFT JOIN edges AS e USING (feature_order)
    LEFT JOIN feature_ranges AS r USING (feature_order)
)
SELECT v.feature_order, v.feature, v.type, v.by_value,
       e.distinct_values, e.lo AS min_value, e.hi AS max_value,
       CASE WHEN v.by_value THEN NULL ELSE e.edges END AS edges
FROM by_value AS v
LEFT JOIN edges AS e USING (feature_order)
ORDER BY v.feature_order`

// key is the bucket key of feature f in pair_cells: bool 0/1, an enum's
// position among its declared values (0 for an undeclared value), a
// number sliced by value itself, any other number the lower edge of its
// bucket (the largest edge at or below it). NULL stays NULL.
func key(i int, f world.Field) string {
	col := "g." + ident(f.Name)
	switch f.Kind {
	case world.Bool:
		return fmt.Sprintf("CAST(CAST(%s AS INTEGER) AS DOUBLE)", col)
	case world.Enum:
		var whens []string
		for j, v := range f.Values {
			whens = append(whens, fmt.Sprintf("WHEN %s THEN %d", lit(v), j+1))
		}
		return fmt.Sprintf("CASE WHEN %s IS NULL THEN NULL ELSE CASE %s %s ELSE 0 END END", col, col, strings.Join(whens, " "))
	}
	x := fmt.Sprintf("CAST(%s AS DOUBLE)", col)
	e := fmt.Sprintf("b.e%d", i+1)
	var whens []string
	for j := Buckets; j >= 2; j-- {
		whens = append(whens, fmt.Sprintf("WHEN %s >= %s[%d] THEN %s[%d]", x, e, j, e, j))
	}
	return fmt.Sprintf("CASE WHEN %s IS NULL OR %s IS NULL THEN %s\n                %s\n                ELSE %s[1] END",
		e, x, x, strings.Join(whens, "\n                "), e)
}

// buckets returns what pair_cells and score_cells bucket pair_groups by:
// each feature's bucket key expression (AS kN), the profile list of them,
// and the relation holding the numeric features' edges (b).
func (g gen) buckets() (keys []string, profile, bins string) {
	var edges, ks []string
	for i, f := range g.d.Features {
		if numeric(f) {
			edges = append(edges, fmt.Sprintf("max(edges) FILTER (WHERE feature_order = %d) AS e%d", i+1, i+1))
		}
		keys = append(keys, fmt.Sprintf("%s AS k%d", key(i, f), i+1))
		ks = append(ks, fmt.Sprintf("k%d", i+1))
	}
	bins = "(SELECT 1) AS b"
	if len(edges) > 0 {
		bins = "(SELECT " + strings.Join(edges, ", ") + " FROM feature_bins) AS b"
	}
	return keys, "[" + strings.Join(ks, ", ") + "]", bins
}

// cells is pair_cells: pair_groups with every feature replaced by its
// bucket key, the keys in declaration order as the list profile.
func (g gen) cells() string {
	keys, profile, bins := g.buckets()
	return `SELECT config_id, fork_step, arm, status, split, label, quadrant, fault,
       ` + profile + ` AS profile,
       n, extra_steps, extra_tokens, extra_usd, extra_seconds
FROM (
    SELECT g.config_id, g.fork_step, g.arm, g.status,
           CASE WHEN g.held_out THEN 'holdout' ELSE 'search' END AS split,
           CASE g.quadrant WHEN 'persuadable' THEN 'rescued' WHEN 'sleeping_dog' THEN 'harmed'
                           WHEN 'sure_thing' THEN 'unchanged' WHEN 'lost_cause' THEN 'unchanged' END AS label,
           g.quadrant, g.fault,
           ` + strings.Join(keys, ",\n           ") + `,
           sum(g.n) AS n,
           sum(g.extra_steps) AS extra_steps, sum(g.extra_tokens) AS extra_tokens,
           sum(g.extra_usd) AS extra_usd, sum(g.extra_seconds) AS extra_seconds
    FROM pair_groups AS g, ` + bins + `
    GROUP BY ALL
)`
}

// examples is example_cells: the rescued and harmed pairs grouped as
// pair_groups groups pairs (groupedFeatures), each group with its first
// two runs ({seed, run_id} structs, by seed and then run_id: a seed
// population's two smallest seeds, a recorded one's runs without a seed
// last), then each feature replaced by its bucket key as cells does. The
// first two runs of a slice are the first two of its cells', so
// slice_examples.sql reads these few rows, not every pair.
func (g gen) examples() string {
	cols, from := g.groupedFeatures(nil)
	var edges, keys []string
	for i, f := range g.d.Features {
		if numeric(f) {
			edges = append(edges, fmt.Sprintf("max(edges) FILTER (WHERE feature_order = %d) AS e%d", i+1, i+1))
		}
		keys = append(keys, key(i, f))
	}
	bins := "(SELECT 1) AS b"
	if len(edges) > 0 {
		bins = "(SELECT " + strings.Join(edges, ", ") + " FROM feature_bins) AS b"
	}
	return `SELECT g.config_id, g.fork_step, g.arm, g.label,
       [` + strings.Join(keys, ",\n        ") + `] AS profile,
       g.runs
FROM (
    SELECT p.config_id, p.fork_step, p.arm, p.label,
           ` + strings.Join(cols, ",\n           ") + `,
           min({'seed': p.seed, 'run_id': p.run_id}, 2) AS runs
    FROM ` + from + `
    WHERE p.status = 'ok' AND p.label IN ('rescued', 'harmed')
    GROUP BY ALL
) AS g, ` + bins
}

// scoreCells is score_cells: pair_groups' ok pairs with a score, each
// feature replaced by its bucket key as in pair_cells, counted per score
// difference; empty for a pass/fail world.
func (g gen) scoreCells() string {
	if g.d.Score == nil {
		return "SELECT CAST(NULL AS INTEGER) AS config_id, CAST(NULL AS INTEGER) AS fork_step, CAST(NULL AS VARCHAR) AS arm,\n" +
			"       CAST(NULL AS DOUBLE[]) AS profile, CAST(NULL AS DOUBLE) AS score_diff, CAST(NULL AS HUGEINT) AS n\nWHERE false"
	}
	keys, profile, bins := g.buckets()
	return `SELECT config_id, fork_step, arm, ` + profile + ` AS profile, score_diff, n
FROM (
    SELECT g.config_id, g.fork_step, g.arm,
           ` + strings.Join(keys, ",\n           ") + `,
           g.score_diff, sum(g.n) AS n
    FROM pair_groups AS g, ` + bins + `
    WHERE g.status = 'ok' AND g.score_diff IS NOT NULL
    GROUP BY ALL
)`
}

// featureBuckets is generic: it reads pair_cells, feature_bins and
// feature_catalog. A bucket's key is its lower edge (or its value); hi is
// the next edge above it, NULL for the last bucket. Labels: the value's
// canonical text when sliced by value ('true', '3', 'stale'), else '< 12'
// (the first bucket: nothing lies below its edge, the minimum), '[12, 40)',
// '>= 40'; 'null' for a missing value.
var featureBuckets = `WITH present AS (
    SELECT DISTINCT config_id, fork_step, CAST(generate_subscripts(profile, 1) AS INTEGER) AS feature_order, unnest(profile) AS key
    FROM pair_cells
),
edged AS (
    SELECT p.config_id, p.fork_step, p.feature_order, b.feature, b.type, b.by_value, p.key,
           CASE WHEN NOT b.by_value AND p.key IS NOT NULL THEN list_filter(b.edges, e -> e > p.key)[1] END AS hi,
           b.edges[1] AS first_edge, c.enum_values
    FROM present AS p
    JOIN feature_bins AS b USING (feature_order)
    JOIN feature_catalog AS c USING (feature_order)
)
SELECT config_id, fork_step, feature_order, feature, type, by_value, key, hi,
       CASE WHEN key IS NULL THEN 'null'
            WHEN type = 'bool' THEN CASE WHEN key = 1 THEN 'true' ELSE 'false' END
            WHEN type = 'enum' THEN coalesce(enum_values[CAST(key AS INTEGER)], 'other')
            WHEN by_value THEN ` + numText("key") + `
            WHEN hi IS NULL THEN '>= ' || ` + numText("key") + `
            WHEN key = first_edge THEN '< ' || ` + numText("hi") + `
            ELSE '[' || ` + numText("key") + ` || ', ' || ` + numText("hi") + ` || ')'
       END AS label
FROM edged`
