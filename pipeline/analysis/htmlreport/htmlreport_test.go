package htmlreport

import (
	"bytes"
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"html"
	"io"
	"regexp"
	"slices"
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

var (
	pairLinkRe = regexp.MustCompile(`<a href="#(pair-[^"]+)" class="(rescued|harmed)"`)
	pairIDRe   = regexp.MustCompile(`<details class="pairview-entry" id="(pair-[^"]+)">`)
)

// The seed's sweep's page links, in every slice's table, its first two
// rescued and first two harmed seeds (as the brute-force reference finds
// them from the pairs files) to their views, each embedded once in the
// page and showing that pair: the same_obs = true slice of arm on links
// rescued seeds 0 and 5, and seed 5's view is forklab show's.
func TestSlicesLinkTheirPairs(t *testing.T) {
	db := resultstest.Open(t, sweep.DefaultSpec())
	var buf bytes.Buffer
	if err := Write(context.Background(), &buf, db); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	checkSelfContained(t, page)
	ids := map[string]int{}
	for _, m := range pairIDRe.FindAllStringSubmatch(page, -1) {
		ids[m[1]]++
	}
	links := pairLinkRe.FindAllStringSubmatch(page, -1)
	if len(links) < 20 || len(ids) < 4 {
		t.Fatalf("%d links to %d embedded pairs", len(links), len(ids))
	}
	for _, l := range links {
		if ids[l[1]] != 1 {
			t.Errorf("link #%s: %d views with that id", l[1], ids[l[1]])
		}
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("view %s embedded %d times", id, n)
		}
	}
	// The reference's first seeds of each slice, by label.
	d := db.Manifest.Declaration
	first := map[string][]int64{}
	pairs := analysistest.ReadPairs(t, db.SQL(), d)
	slices.SortFunc(pairs, func(a, b analysistest.Pair) int { return cmp.Compare(a.Seed, b.Seed) })
	for _, p := range pairs {
		if p.Arm != string(fork.On) || (p.Label() != string(fork.Rescued) && p.Label() != string(fork.Harmed)) {
			continue
		}
		k := fmt.Sprintf("%s/%v", p.Label(), p.Features[0].Bool()) // same_obs
		if len(first[k]) < 2 {
			first[k] = append(first[k], p.Seed)
		}
	}
	for _, c := range []struct {
		value string
		label fork.Label
		key   string
	}{{"true", fork.Rescued, "rescued/true"}, {"false", fork.Harmed, "harmed/false"}} {
		want := fmt.Sprintf(`<td>same_obs</td><td>%s</td>`, c.value)
		i := strings.Index(page, want)
		if i < 0 {
			t.Fatalf("no row %s", want)
		}
		row := page[i : i+strings.Index(page[i:], "</tr>")]
		for _, seed := range first[c.key] {
			link := fmt.Sprintf(`<a href="#pair-c0-f3-on-s%d-r0" class="%s"`, seed, c.label)
			if !strings.Contains(row, link) {
				t.Errorf("row same_obs %s lacks %s:\n%s", c.value, link, row)
			}
		}
	}
	if first["rescued/true"][1] != 5 {
		t.Fatalf("the reference's second rescued seed of same_obs true is %d, not 5", first["rescued/true"][1])
	}
	i := strings.Index(page, `id="pair-c0-f3-on-s5-r0"`)
	view := page[i : i+strings.Index(page[i:], "</details>")]
	for _, s := range []string{"seed 5 · fork step 3 · on vs off · replica 0 — rescued", "rescued (persuadable): off failed, on succeeded",
		`<tr class="pv-part" title="the branches part here"><td>4</td>`, "<td>failed · cost steps 5</td><td>succeeded · cost steps 5</td>"} {
		if !strings.Contains(view, s) {
			t.Errorf("seed 5's view lacks %q", s)
		}
	}
}

var (
	textRe     = regexp.MustCompile(`<text\b[^>]*font-size:10px[^>]*>([^<]*)</text>`)
	viewBoxRe  = regexp.MustCompile(`^<svg class="chart" viewBox="0 0 [0-9.]+ [0-9.]+"`)
	tableRe    = regexp.MustCompile(`(?s)(.{0,40})<table\b([^>]*)>`)
	scrollCSS  = regexp.MustCompile(`\.scroll \{[^}]*overflow-x: auto;`)
	chartCSS   = regexp.MustCompile(`svg\.chart \{[^}]*width: 100%; height: auto;`)
	ariaNameRe = regexp.MustCompile(`aria-label="([a-z_]+): rescued \(up\)`)
)

// chartTicks splits a chart's tick labels (gonum draws them at 10 px) into
// the x axis's and the y axis's: gonum draws the x axis first, and the y
// axis's label in a group rotated 90°.
func chartTicks(svg string) (x, y []string) {
	i := strings.Index(svg, `<g transform="rotate(90)">`)
	if i < 0 {
		i = len(svg)
	}
	for _, m := range textRe.FindAllStringSubmatch(svg[:i], -1) {
		x = append(x, html.UnescapeString(m[1]))
	}
	for _, m := range textRe.FindAllStringSubmatch(svg[i:], -1) {
		y = append(y, html.UnescapeString(m[1]))
	}
	return x, y
}

// Issue 12 I, without a browser: every chart scales to its box (a
// viewBox, and CSS width 100% with the height following), so nothing is
// clipped at a phone's width; every table sits in a box that scrolls
// sideways, so a wide one is never cut; and every chart has tick labels
// on both axes — on the slice charts, one per value of the feature
// (repeat_run, obs_value and budget_left once had none). The browser
// tests measure the same in Chromium.
func TestChartsScaleTablesScrollEveryAxisLabelled(t *testing.T) {
	seed := sweep.DefaultSpec()
	noisy := resultstest.NoisySpec()
	tool := sweep.DefaultSpec()
	tool.World, tool.ForkAt, tool.Params, tool.Seeds = "toolloop", []int{2}, nil, sweep.Range{Start: 0, End: 400}
	tool.Grid = map[string][]any{"p_fault": {0.2, 0.4}}
	for _, tc := range []struct {
		name string
		spec sweep.Spec
		// slice charts' x tick labels by feature; nil: at least one
		xticks map[string][]string
	}{
		{"seed", seed, map[string][]string{"same_obs": {"false", "true"}, "repeat_run": {"0", "2", "3"},
			"obs_value": {"0", "1", "3"}, "steps_used": {"3"}, "budget_left": {"4", "5", "6"}}},
		{"noisy", noisy, nil},
		{"toolloop grid", tool, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, _ := render(t, resultstest.Open(t, tc.spec))
			if !chartCSS.MatchString(page) || !scrollCSS.MatchString(page) {
				t.Fatal("the page's CSS lost svg.chart's width: 100%; height: auto or .scroll's overflow-x: auto")
			}
			svgs := svgRe.FindAllString(page, -1)
			slices := 0
			for i, svg := range svgs {
				if !viewBoxRe.MatchString(svg) {
					t.Errorf("chart %d has no viewBox: %.120s", i, svg)
				}
				x, y := chartTicks(svg)
				name := ""
				if m := ariaNameRe.FindStringSubmatch(svg); m != nil {
					name = m[1]
					slices++
				}
				if len(x) == 0 || len(y) < 2 {
					t.Errorf("chart %d (%s) has x tick labels %q and y tick labels %q", i, name, x, y)
				}
				if want, ok := tc.xticks[name]; ok && strings.Join(x, ",") != strings.Join(want, ",") {
					t.Errorf("slice chart %s: x tick labels %q, want %q", name, x, want)
				}
			}
			if slices == 0 || len(svgs)-slices < 3 && tc.name != "toolloop grid" {
				t.Errorf("%d charts, %d of them slice charts", len(svgs), slices)
			}
			for _, m := range tableRe.FindAllStringSubmatch(page, -1) {
				if !strings.HasSuffix(m[1], `<div class="scroll">`) && !strings.Contains(m[2], `class="kv"`) {
					t.Errorf("a table outside a scrolling box: …%s<table%s>", m[1], m[2])
				}
			}
		})
	}
}

// A log axis always has two labels at least: the noisy report's CI-width
// chart once had one ("10%") over a range of 7% to 19%.
func TestLogTicksLabelTwoAtLeast(t *testing.T) {
	for _, tc := range []struct {
		min, max float64
		label    func(float64) string
		want     string
	}{
		{0.01, 1, pctLabel, "1%,2%,5%,10%,20%,50%,100%"},
		{0.07, 0.19, pctLabel, "7%,8%,9%,10%"},
		{0.11, 0.19, pctLabel, "12%,14%,16%,18%"},
		{100, 400, numLabel, "100,200"},
	} {
		var got []string
		for _, tick := range (logTicks{tc.label}).Ticks(tc.min, tc.max) {
			if tick.Label != "" {
				got = append(got, tick.Label)
			}
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("[%g, %g]: labels %q, want %s", tc.min, tc.max, got, tc.want)
		}
	}
}
