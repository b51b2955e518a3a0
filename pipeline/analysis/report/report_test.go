package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// The seed's table, from Parquet through DuckDB, exactly.
func TestSeedTableThroughDuckDB(t *testing.T) {
	db := resultstest.Open(t, sweep.DefaultSpec())
	var buf bytes.Buffer
	if err := Write(context.Background(), &buf, db); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"rescued 75   harmed 83   unchanged 142   net -8",
		"McNemar exact p = 0.578 on 158 discordant pairs",
		"0          3          on   same_obs     false  155    0        83      72         -83",
		"0          3          on   same_obs     true   145    75       0       70         75",
		"▶ same_obs = true (chosen)",
		"It helps most where same_obs = true (75 rescued, 0\nharmed, net +75) and harms most where same_obs = false (0 rescued, 83 harmed,\nnet -83).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	tab, err := db.Query(context.Background(), `SELECT same_obs, label, count(*) FROM pairs GROUP BY ALL ORDER BY ALL`)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(tab.Rows); got != "[[false harmed 83] [false unchanged 72] [true rescued 75] [true unchanged 70]]" {
		t.Errorf("pairs by same_obs: %s", got)
	}
}

// Other seed ranges and fork steps, against the reference core's tables in
// testdata/seed/golden.json.
func TestReferenceTablesThroughDuckDB(t *testing.T) {
	b, err := os.ReadFile("../../../testdata/seed/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Tables []struct {
			Start, Seeds int
			ForkAt       int    `json:"fork_at"`
			Policy       string `json:"policy"`
			Table        struct {
				Total map[string]int64 `json:"total"`
				Net   int64            `json:"net"`
			} `json:"table"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, tc := range g.Tables {
		if tc.Policy != "" || tc.ForkAt > 9 {
			continue
		}
		spec := sweep.DefaultSpec()
		spec.Seeds = sweep.Range{Start: uint64(tc.Start), End: uint64(tc.Start + tc.Seeds)}
		spec.ForkAt = []int{tc.ForkAt}
		db := resultstest.Open(t, spec)
		tab, err := db.Run(context.Background(), "summary")
		if err != nil {
			t.Fatal(err)
		}
		idx := columnIndex(tab)
		row := tab.Rows[0]
		got := fmt.Sprint(row[idx["rescued"]], row[idx["harmed"]], row[idx["unchanged"]], row[idx["net"]])
		want := fmt.Sprint(tc.Table.Total["rescue"], tc.Table.Total["harm"], tc.Table.Total["unchanged"], tc.Table.Net)
		if got != want {
			t.Errorf("seeds %d+%d fork %d: rescued harmed unchanged net = %s, reference core %s", tc.Start, tc.Seeds, tc.ForkAt, got, want)
		}
		checked++
	}
	if checked < 8 {
		t.Fatalf("checked only %d tables", checked)
	}
}

// Values print without losing what they hold: bytes as DuckDB prints a
// BLOB (a UUID the driver gives as 16 bytes once printed raw), times with
// their fraction of a second.
func TestFormatKeepsValues(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{[]byte{0x01, 0x93, 0x64, 0x57, 'a', '\\', 0xff}, `\x01\x93dWa\x5C\xFF`},
		{time.Date(2024, 2, 29, 12, 34, 56, 789012000, time.UTC), "2024-02-29T12:34:56.789012Z"},
		{time.Date(2024, 2, 29, 12, 34, 56, 0, time.UTC), "2024-02-29T12:34:56Z"},
		{nil, "NULL"},
	} {
		if got := Format(tc.v); got != tc.want {
			t.Errorf("Format(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// Costs print by one rule, the one docs/agent-protocol.md states: exactly
// two decimals from 0.1 up, three significant digits below (an agent's
// branch costing $0.003 once showed as "0 usd per branch against off's 0"),
// trailing zeros kept so that numbers side by side read alike (the report
// printed "4.6 steps per branch against off's 4.26" and "+0.002 per run"),
// "0" for zero, and never NaN or Inf.
func TestCostNum(t *testing.T) {
	for _, tc := range []struct {
		x          float64
		num, signd string
	}{
		{0, "0", "0"},
		{4.49, "4.49", "+4.49"},
		{4.6, "4.60", "+4.60"},
		{1927.8, "1927.80", "+1927.80"},
		{12, "12.00", "+12.00"},
		{0.11, "0.11", "+0.11"},
		{0.1, "0.10", "+0.10"},
		{0.0999, "0.0999", "+0.0999"},
		{0.09996, "0.10", "+0.10"},
		{0.0009996, "0.00100", "+0.00100"},
		{0.002, "0.00200", "+0.00200"},
		{-0.000079, "-0.0000790", "-0.0000790"},
		{0.003125, "0.00313", "+0.00313"},
		{-0.0533333, "-0.0533", "-0.0533"},
		{0.05, "0.0500", "+0.0500"},
		{0.000125, "0.000125", "+0.000125"},
		{2e-9, "0.00000000200", "+0.00000000200"},
		{-1.5, "-1.50", "-1.50"},
		{-0.004, "-0.00400", "-0.00400"},
		{math.NaN(), "n/a", "n/a"},
		{math.Inf(1), "n/a", "n/a"},
		{math.Inf(-1), "n/a", "n/a"},
	} {
		if got := CostNum(tc.x); got != tc.num {
			t.Errorf("CostNum(%v) = %q, want %q", tc.x, got, tc.num)
		}
		if got := CostSigned(tc.x); got != tc.signd {
			t.Errorf("CostSigned(%v) = %q, want %q", tc.x, got, tc.signd)
		}
	}
	// A total of steps or tokens is a whole number and prints as one (the
	// policy table's "extra steps" column: -13, +7, 0); totals of dollars
	// or seconds, and fractional totals, follow CostNum.
	for _, tc := range []struct {
		k    int
		x    float64
		want string
	}{
		{0, -13, "-13"}, {0, 7, "+7"}, {0, 0, "0"}, {1, 708000, "+708000"},
		{0, 2.5, "+2.50"}, {2, 3, "+3.00"}, {2, 0.00312, "+0.00312"}, {3, math.NaN(), "n/a"},
	} {
		if got := CostTotalSigned(tc.k, tc.x); got != tc.want {
			t.Errorf("CostTotalSigned(%d, %v) = %q, want %q", tc.k, tc.x, got, tc.want)
		}
	}
	rows := []results.Row{{"cost": "usd", "mean": 0.00312, "mean_off": 0.00201, "extra": 0.00111, "per_net_rescue": 0.0222}}
	want := "cost: 0.00312 usd per branch against off's 0.00201 (+0.00111 per run), +0.0222 usd per net rescue"
	if got := CostLine(rows); got != want {
		t.Errorf("CostLine = %q, want %q", got, want)
	}
}

// A rate, p-value or table cell that does not exist (every pair of an arm
// errored: 0 of 0) prints as n/a, never "NaN%" or "NaN".
func TestNoNaNInReport(t *testing.T) {
	for _, tc := range []struct {
		name, got, want string
	}{
		{"Pct(NaN)", Pct(math.NaN()), "n/a"},
		{"Pct(+Inf)", Pct(math.Inf(1)), "n/a"},
		{"PctUp(NaN)", PctUp(math.NaN()), "n/a"},
		{"PValue(NaN)", PValue(math.NaN()), "n/a"},
		{"PEquals(NaN)", PEquals(math.NaN()), "n/a"},
		{"Num(NaN)", Num(math.NaN()), "n/a"},
		{"Signed(-Inf)", Signed(math.Inf(-1)), "n/a"},
		{"Format(NaN)", Format(math.NaN()), "n/a"},
		{"Format(+Inf)", Format(math.Inf(1)), "n/a"},
		{"Pct(0.0267)", Pct(0.0267), "2.7%"},
		{"Format(0.5)", Format(0.5), "0.5000"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	var b strings.Builder
	writeHeadline(&b, results.Row{"arm": "on", "fork_step": int64(2), "pairs": int64(0), "errors": int64(20),
		"net_rate": math.NaN(), "rescue_rate": math.NaN(), "mcnemar_p": 1.0}, "", nil, "")
	want := "on vs off · fork step 2 · 0 pairs (and 20 pairs that errored, not labelled)\n" +
		"  no labelled pair: rates, intervals and McNemar's test are n/a (every pair errored)\n\n"
	if b.String() != want {
		t.Errorf("headline of an arm whose every pair errored:\n%s\nwant\n%s", b.String(), want)
	}
}
