package htmlreport

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"html"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/analysistest"
	"github.com/forklab/forklab/pipeline/analysis/report"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
)

// render collects and renders the report of db, with the directory shown
// as "out" so the page does not depend on the temporary path.
func render(t testing.TB, db *results.DB) (string, *report.Sections) {
	t.Helper()
	s, err := report.Collect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Render(&buf, s, db.Manifest, "out"); err != nil {
		t.Fatal(err)
	}
	return buf.String(), s
}

var svgRe = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)

// checkSelfContained fails on anything that could make a browser reach
// the network or run code: URLs of any scheme, scripts, external
// resources, and on inline SVG that is not well-formed XML.
func checkSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"http://", "https://", "//www.", "<script", "<link", "@import", "url(", " src=", " href=\"/", "<iframe", "<img", "<object", "<embed", "xmlns"} {
		if i := strings.Index(page, bad); i >= 0 {
			t.Errorf("page holds %q: …%s…", bad, page[max(0, i-60):min(len(page), i+60)])
		}
	}
	for _, m := range regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "#") {
			t.Errorf("link %q leaves the page", m[1])
		}
	}
	for i, svg := range svgRe.FindAllString(page, -1) {
		d := xml.NewDecoder(strings.NewReader(svg))
		for {
			_, err := d.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("svg %d is not well-formed XML: %v", i, err)
				break
			}
		}
	}
}

// visibleText is the page's text as a reader sees it, charts and styles
// left out, one block per line; timestamps, durations and the spec's JSON
// (the sweep package's to change) masked.
func visibleText(page string) string {
	for _, re := range []string{`(?s)<style>.*?</style>`, `(?s)<svg\b.*?</svg>`, `(?s)<title>.*?</title>`, `(?s)<pre>.*?</pre>`} {
		page = regexp.MustCompile(re).ReplaceAllString(page, "")
	}
	page = regexp.MustCompile(`</(t[dh])>`).ReplaceAllString(page, " ")
	page = regexp.MustCompile(`(?i)</?(p|h[1-6]|tr|div|section|article|summary|figcaption|figure|dt|dd|nav|header|footer|table|details|pre|a)\b[^>]*>`).ReplaceAllString(page, "\n")
	page = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(page, "")
	page = html.UnescapeString(page)
	page = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`).ReplaceAllString(page, "TIME")
	page = regexp.MustCompile(`\((\d+(\.\d+)?(ms|s|µs)|0s)\)`).ReplaceAllString(page, "(DURATION)")
	var lines []string
	for _, l := range strings.Split(page, "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// The seed's sweep: the page holds the numbers of the independent
// brute-force reference (analysistest, pair by pair from the pairs files),
// eight charts, and nothing that reaches outside the file.
func TestSeedReport(t *testing.T) {
	db := resultstest.Open(t, sweep.DefaultSpec())
	page, s := render(t, db)
	checkSelfContained(t, page)
	text := visibleText(page)
	if n := len(svgRe.FindAllString(page, -1)); n != 8 {
		t.Errorf("%d charts, want 8: 5 slice charts, 2 frontier panels, the Qini curve", n)
	}
	for _, want := range []string{
		`<dd class="rescued">75</dd>`, `<dd class="harmed">83</dd>`, `<dd>142</dd>`, `<dd class="net neg">-8</dd>`,
		"net rate <b>-2.7%</b> (95% CI -10.8% to 5.5%, Newcombe) · McNemar exact p <b>= 0.578</b> on 158 discordant pairs",
		"cost: 4.49 steps per branch against off&#39;s 4.38 (&#43;0.11 per run), no net rescue to pay for",
		`aria-label="same_obs: rescued (up) and harmed (down) pairs per value, net as a triangle"`,
		`aria-label="budget_left: rescued`,
		"policy frontier on the search seeds: each candidate trigger&#39;s harmed against rescued pairs; chosen: same_obs = true",
		"chosen: same_obs = true</text>", "chosen: <b>same_obs = true</b>",
		"Qini coefficient 0.1951: the area between the curve and random firing",
		"<th>seeds</th><td>0:300 (300 seeds)</td>",
		`<td class="chosen">▶ same_obs = true (chosen)</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Every slice, the chosen trigger and the baselines, and the Qini curve
	// as the reference counts them.
	d := db.Manifest.Declaration
	pairs := analysistest.ReadPairs(t, db.SQL(), d)
	for k, c := range analysistest.Slices(d, pairs) {
		row := fmt.Sprintf("\n%s %s %d %d %d %d %+d ", k.Feature, k.Value, c.Pairs, c.Rescued, c.Harmed, c.SureThing+c.LostCause, c.Rescued-c.Harmed)
		if !strings.Contains(text, row) {
			t.Errorf("page lacks the slice row %q", row)
		}
	}
	ref := analysistest.Search(d, pairs, analysistest.SearchOptions{MaxHarm: 0, Scope: "clean", Holdout: 0.3})[[2]int{0, 3}]
	chosen := ref[0]
	row := fmt.Sprintf("\n▶ %s (chosen) ok %d %d %d %d %+d %d %d %d %d %+d ", chosen.Trigger,
		chosen.Search.Fires, chosen.Search.Rescued, chosen.Search.Harmed, chosen.Search.HarmedClean, chosen.Search.Rescued-chosen.Search.Harmed,
		chosen.Holdout.Fires, chosen.Holdout.Rescued, chosen.Holdout.Harmed, chosen.Holdout.HarmedClean, chosen.Holdout.Rescued-chosen.Holdout.Harmed)
	if !strings.Contains(text, row) {
		t.Errorf("page lacks the chosen trigger's row %q", row)
	}
	pts, _ := analysistest.Qini(d, pairs, 0, 3, 0.3)
	for _, p := range pts {
		row := fmt.Sprintf("\n%.0f%% %d %s %s %s ", 100*p.FireRate, p.Fired, report.Num(p.Rescued), report.Num(p.Harmed), report.Signed(p.Net))
		if !strings.Contains(text, row) {
			t.Errorf("page lacks the Qini row %q", row)
		}
	}
	if strings.Contains(page, `id="convergence"`) {
		t.Error("a greedy sweep shows the replicas-and-seeds section")
	}
	for _, p := range s.Result {
		if !strings.Contains(text, "\n"+p+"\n") {
			t.Errorf("page lacks the Result paragraph %q", p)
		}
	}
}

// Every headline of the text report appears in the page with the same
// figures, for every arm and fork step of a noisy sweep; the page adds
// the replicas-and-seeds charts.
func TestNoisyReportMatchesText(t *testing.T) {
	db := resultstest.Open(t, resultstest.NoisySpec())
	page, s := render(t, db)
	checkSelfContained(t, page)
	visible := visibleText(page)
	var text bytes.Buffer
	if err := report.Write(context.Background(), &text, db); err != nil {
		t.Fatal(err)
	}
	head := regexp.MustCompile(`(?m)^(\S+) vs off · fork step (\d+) · (\d+) pairs\n  rescued (\d+)   harmed (\d+)   unchanged (\d+)   net (\S+)\n  sure things (\d+) · lost causes (\d+) · net rate (\S+) \(95% CI (\S+) to (\S+), Newcombe\) · McNemar exact p (= \S+|< 1e-300) on (\d+) discordant pairs`)
	ms := head.FindAllStringSubmatch(text.String(), -1)
	if len(ms) != 6 {
		t.Fatalf("text report has %d headlines, want 6", len(ms))
	}
	for _, m := range ms {
		for _, want := range []string{
			m[1] + " vs off · fork step " + m[2] + " · " + m[3] + " pairs\nrescued\n" + m[4] + "\nharmed\n" + m[5] + "\nunchanged\n" + m[6] + "\nnet\n" + m[7] + "\n",
			"\nnet rate " + m[10] + " (95% CI " + m[11] + " to " + m[12] + ", Newcombe) · McNemar exact p " + m[13] + " on " + m[14] + " discordant pairs\n",
			"\nsure things " + m[8] + " · lost causes " + m[9] + " · ",
		} {
			if !strings.Contains(visible, want) {
				t.Errorf("%s at fork step %s: page lacks %q", m[1], m[2], want)
			}
		}
	}
	// 6 × 5 slice charts; for each of the 2 fork steps searched, 2
	// frontier panels and the Qini curve; 6 × 2 replicas-and-seeds charts.
	if n := len(svgRe.FindAllString(page, -1)); n != 48 {
		t.Errorf("%d charts, want 48", n)
	}
	if s.Convergence == nil || !strings.Contains(page, `id="convergence"`) {
		t.Fatal("no replicas-and-seeds section for a noisy sweep")
	}
	for _, want := range []string{
		`<span class="swatch" style="background:#0072B2"></span> majority of 1 replica`,
		`<span class="swatch" style="background:#E69F00"></span> majority of 3 replicas`,
		"<summary>on vs off · fork step 2</summary>", "temperature 0.1 · p_stall 0.15 · p_obs_noise 0.05 · p_refresh_fail 0.2",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Arm on is open; the others are folded.
	if open, all := strings.Count(page, "<details open>\n<summary>on vs off"), strings.Count(page, "<summary>on vs off"); open != 4 || all != 4 {
		t.Errorf("arm on open in %d of %d groups, want 4 of 4", open, all)
	}
	if n := strings.Count(page, "<details open>\n<summary>placebo vs off"); n != 0 {
		t.Errorf("%d placebo groups open", n)
	}
}

// Without arm on there is no search: the page says why instead.
func TestReportWithoutSearch(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Arms = []fork.Arm{fork.Off, fork.Placebo}
	db := resultstest.Open(t, spec)
	page, s := render(t, db)
	checkSelfContained(t, page)
	if s.Search != nil || !strings.Contains(page, "<p class=\"lede\">Skipped: "+html.EscapeString(s.SearchNote)+"</p>") {
		t.Errorf("no note that the policy search was skipped (%q)", s.SearchNote)
	}
	if n := len(svgRe.FindAllString(page, -1)); n != 5 {
		t.Errorf("%d charts, want the 5 slice charts", n)
	}
	if !strings.Contains(page, "<h3>placebo vs off · fork step 3 · 300 pairs</h3>") {
		t.Error("no headline for the placebo arm")
	}
}

// A parameter grid labels every group with its configuration.
func TestReportGrid(t *testing.T) {
	spec := sweep.DefaultSpec()
	spec.Grid = map[string][]any{"p_stall": {0.0, 0.2}}
	db := resultstest.Open(t, spec)
	page, _ := render(t, db)
	checkSelfContained(t, page)
	for _, want := range []string{"<h3>on vs off · fork step 3 · config 0 · 300 pairs</h3>", "<h3>on vs off · fork step 3 · config 1 · 300 pairs</h3>",
		"2 configurations", `<th>grid</th><td>{&#34;p_stall&#34;:[0,0.2]}</td>`,
		"<summary>config 0 (p_stall 0) · fork step 3: recover when same_obs = true</summary>", "<summary>config 1 (p_stall 0.2) · fork step 3: recover when "} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestWriteCollects(t *testing.T) {
	db := resultstest.Open(t, sweep.DefaultSpec())
	var buf bytes.Buffer
	if err := Write(context.Background(), &buf, db); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(buf.String()), "</html>") {
		t.Error("Write did not produce a whole page")
	}
}
