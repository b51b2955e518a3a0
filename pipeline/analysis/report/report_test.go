package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
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

// Costs print with enough significant digits that a small one does not
// round to 0 (an agent's branch costing $0.003 showed as "0 usd per branch
// against off's 0"): two decimals from 0.1 up, as means print, three
// significant digits below.
func TestCostNum(t *testing.T) {
	for _, tc := range []struct {
		x          float64
		num, signd string
	}{
		{0, "0", "0"},
		{4.49, "4.49", "+4.49"},
		{1927.8, "1927.8", "+1927.8"},
		{0.11, "0.11", "+0.11"},
		{0.1, "0.1", "+0.1"},
		{0.0999, "0.0999", "+0.0999"},
		{0.003125, "0.00313", "+0.00313"},
		{-0.0533333, "-0.0533", "-0.0533"},
		{0.05, "0.05", "+0.05"},
		{0.000125, "0.000125", "+0.000125"},
		{2e-9, "0.000000002", "+0.000000002"},
		{-1.5, "-1.5", "-1.5"},
	} {
		if got := CostNum(tc.x); got != tc.num {
			t.Errorf("CostNum(%v) = %q, want %q", tc.x, got, tc.num)
		}
		if got := CostSigned(tc.x); got != tc.signd {
			t.Errorf("CostSigned(%v) = %q, want %q", tc.x, got, tc.signd)
		}
	}
	rows := []results.Row{{"cost": "usd", "mean": 0.00312, "mean_off": 0.00201, "extra": 0.00111, "per_net_rescue": 0.0222}}
	want := "cost: 0.00312 usd per branch against off's 0.00201 (+0.00111 per run), +0.0222 usd per net rescue"
	if got := CostLine(rows); got != want {
		t.Errorf("CostLine = %q, want %q", got, want)
	}
}
