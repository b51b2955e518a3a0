package htmlreport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/analysis/results"
	"github.com/forklab/forklab/pipeline/analysis/results/resultstest"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// chromium finds Debian's chromium (or $FORKLAB_CHROMIUM). Without one the
// test is skipped, unless FORKLAB_REQUIRE_CHROMIUM is set (CI sets it):
// then it fails.
func chromium(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	if p := os.Getenv("FORKLAB_CHROMIUM"); p != "" {
		names = []string{p}
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("FORKLAB_REQUIRE_CHROMIUM") != "" {
		t.Fatalf("no chromium on PATH and FORKLAB_REQUIRE_CHROMIUM is set: install Debian's (make chromium, or apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: the browser check of the HTML report is skipped (make chromium installs Debian's; FORKLAB_REQUIRE_CHROMIUM=1 makes this a failure)")
	return ""
}

// headless runs chromium headless on a window of size ("1280,800"),
// offline: every host name resolves to nothing, and the background
// services that call home are off (without that the browser stalls trying
// to reach them).
func headless(t *testing.T, bin, size string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--user-data-dir=" + t.TempDir(), "--window-size=" + size}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.Bytes()
}

// measure is what the test's script reads from the laid-out page.
type measure struct {
	ViewportWidth, ScrollWidth  int
	BodyFontPx, SmallestFontPx  float64
	Charts, ChartsShown         int
	NarrowestChart, WidestChart float64
	ShortestChart               float64
	CountsOverflow              int
	Headline                    string
	// ChartsPastRight and BoxesPastRight count charts and table boxes
	// whose right edge lies past the window's: clipped, out of reach.
	ChartsPastRight, BoxesPastRight int
	// TablesPastCell counts tables outside a scroll box that run past
	// their container: cut off, or drawn over their neighbour.
	TablesPastCell int
	// ConfigsScroll: the configurations table is wider than its box, so
	// part of it is out of sight until scrolled.
	ConfigsScroll bool
	// LabelsOutside counts a chart's texts (tick labels, axis titles)
	// drawn more than 2 px past its box, so cut off (a glyph's box may
	// overhang by a pixel); Outside names the first dozen; ChartsFewLabels
	// counts the charts shown with fewer than three texts (an axis
	// without tick labels).
	LabelsOutside, ChartsFewLabels int
	Outside                        []string
	// SmallestTextPx is the smallest rendered size of any text shown, in
	// the page or in a chart (its font size times the chart's scale);
	// SmallTexts names the first dozen below minTextPx.
	SmallestTextPx float64
	SmallTexts     []string
	// ClippedCells names (the first dozen of) the table cells whose
	// content overflows them, and the cells a table's scrolling box cuts
	// or hides: a reader sees "-" of "-13".
	ClippedCells []string
	// FrontierPoints counts the points drawn on the frontier charts shown,
	// Untitled those without a <title> (the hover text naming the
	// trigger).
	FrontierPoints, Untitled int
}

// minTextPx is the smallest readable rendered text size, in CSS px.
const minTextPx = 9

// measureScript lays the page out in the browser and writes what a reader
// would notice into <body data-measure>: the report itself has no script;
// the test adds this one to a copy.
const measureScript = `<script>
var MINPX = MINTEXTPX;
if (UNFOLD) { document.querySelectorAll('details').forEach(function (d) { d.open = true; }); }
(function () {
  var m = {ViewportWidth: window.innerWidth, ScrollWidth: document.documentElement.scrollWidth,
    BodyFontPx: parseFloat(getComputedStyle(document.body).fontSize), SmallestFontPx: 1e9,
    Charts: 0, ChartsShown: 0, NarrowestChart: 1e9, WidestChart: 0, ShortestChart: 1e9, CountsOverflow: 0,
    ChartsPastRight: 0, BoxesPastRight: 0, TablesPastCell: 0, ConfigsScroll: false, LabelsOutside: 0, ChartsFewLabels: 0, Outside: [],
    Headline: (document.querySelector('#headline .card') || {}).innerText || ''};
  document.querySelectorAll('p, td, th, dt, dd, figcaption, summary, h1, h2, h3, nav a').forEach(function (e) {
    if (e.getClientRects().length && e.innerText.trim()) {
      m.SmallestFontPx = Math.min(m.SmallestFontPx, parseFloat(getComputedStyle(e).fontSize));
    }
  });
  document.querySelectorAll('svg.chart').forEach(function (s) {
    m.Charts++;
    var r = s.getBoundingClientRect();
    if (!r.width) { return; }
    m.ChartsShown++;
    m.NarrowestChart = Math.min(m.NarrowestChart, r.width);
    m.WidestChart = Math.max(m.WidestChart, r.width);
    m.ShortestChart = Math.min(m.ShortestChart, r.height);
    if (r.right > window.innerWidth + 0.5) { m.ChartsPastRight++; }
    var texts = s.querySelectorAll('text');
    if (texts.length < 3) { m.ChartsFewLabels++; }
    texts.forEach(function (x) {
      var b = x.getBoundingClientRect();
      if (b.width && (b.left < r.left - 2 || b.right > r.right + 2 || b.top < r.top - 2 || b.bottom > r.bottom + 2)) { m.LabelsOutside++; if (m.Outside.length < 12) { m.Outside.push((s.getAttribute('aria-label')||'').slice(0,30) + ' | ' + x.textContent + ' | ' + [b.left-r.left, r.right-b.right, b.top-r.top, r.bottom-b.bottom].map(Math.round).join(',')); } }
    });
  });
  m.SmallestTextPx = 1e9; m.SmallTexts = []; m.ClippedCells = [];
  var shown = function (e) { var r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  var name = function (e) { return (e.closest('[id]') ? '#' + e.closest('[id]').id + ' ' : '') + e.tagName.toLowerCase() + ' "' + e.textContent.trim().slice(0, 40) + '"'; };
  var small = function (e, px) {
    m.SmallestTextPx = Math.min(m.SmallestTextPx, px);
    if (px < MINPX && m.SmallTexts.length < 12) { m.SmallTexts.push(name(e) + ' ' + px.toFixed(1) + ' px'); }
  };
  document.querySelectorAll('body *').forEach(function (e) {
    if (e.closest('svg') || !shown(e)) { return; }
    var own = Array.prototype.some.call(e.childNodes, function (n) { return n.nodeType === 3 && n.textContent.trim(); });
    if (own) { small(e, parseFloat(getComputedStyle(e).fontSize)); }
  });
  document.querySelectorAll('svg.chart').forEach(function (s) {
    if (!shown(s)) { return; }
    var scale = s.getBoundingClientRect().width / s.viewBox.baseVal.width;
    s.querySelectorAll('text').forEach(function (x) {
      if (x.textContent.trim() && shown(x)) { small(x, parseFloat(getComputedStyle(x).fontSize) * scale); }
    });
  });
  document.querySelectorAll('td, th').forEach(function (c) {
    if (!shown(c) || m.ClippedCells.length >= 12) { return; }
    var r = c.getBoundingClientRect(), box = c.closest('.scroll') || c.closest('table').parentElement, b = box.getBoundingClientRect();
    if (c.scrollWidth > c.clientWidth + 1 || r.right > b.right + 1 || r.left < b.left - 1) { m.ClippedCells.push(name(c)); }
  });
  m.FrontierPoints = 0; m.Untitled = 0;
  document.querySelectorAll('svg.chart.frontier').forEach(function (s) {
    if (!shown(s)) { return; }
    s.querySelectorAll('.pt').forEach(function (p) {
      m.FrontierPoints++;
      var t = p.querySelector('title');
      if (!t || !t.textContent.trim()) { m.Untitled++; }
    });
  });
  document.querySelectorAll('table').forEach(function (t) {
    var p = t.parentElement;
    if (!p.classList.contains('scroll') && t.getBoundingClientRect().right > p.getBoundingClientRect().right + 0.5) { m.TablesPastCell++; }
  });
  var cb = document.querySelector('#configs .scroll');
  if (cb) { m.ConfigsScroll = cb.scrollWidth > cb.clientWidth + 0.5; }
  document.querySelectorAll('.scroll').forEach(function (b) {
    var r = b.getBoundingClientRect();
    if (r.width && r.right > window.innerWidth + 0.5) { m.BoxesPastRight++; }
  });
  document.querySelectorAll('.card').forEach(function (c) {
    var cr = c.getBoundingClientRect();
    c.querySelectorAll('dd').forEach(function (d) {
      if (d.getBoundingClientRect().right > cr.right + 0.5) { m.CountsOverflow++; }
    });
  });
  window.parent.document.body.setAttribute('data-measure', JSON.stringify(m));
})();
</script>
</body>`

// layout renders the report of db in headless Chromium, width px wide,
// and returns what the measuring script read, and the page's path.
// Chromium's window is at least 500 px wide, so narrower widths are laid
// out in an iframe of that width (a viewport of its own).
func layout(t *testing.T, bin string, db *results.DB, width int) (measure, string) {
	t.Helper()
	return layoutUnfolded(t, bin, db, width, false)
}

// layoutUnfolded is layout, with every <details> of the page opened
// first when unfold is set.
func layoutUnfolded(t *testing.T, bin string, db *results.DB, width int, unfold bool) (measure, string) {
	t.Helper()
	page, _ := render(t, db)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.html")
	if err := os.WriteFile(report, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(dir, "probe.html")
	measured := strings.Replace(page, "</body>", strings.NewReplacer("MINTEXTPX", fmt.Sprint(minTextPx), "UNFOLD", fmt.Sprint(unfold)).Replace(measureScript), 1)
	size := fmt.Sprintf("%d,800", width)
	if width < 500 {
		measured = fmt.Sprintf(`<!DOCTYPE html><html><body style="margin:0"><iframe width="%d" height="800" style="border:0" srcdoc="%s"></iframe></body></html>`,
			width, html.EscapeString(measured))
		size = "1280,800"
	}
	if err := os.WriteFile(probe, []byte(measured), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := headless(t, bin, size, "--dump-dom", "file://"+probe)
	mm := regexp.MustCompile(`data-measure="([^"]*)"`).FindSubmatch(dom)
	if mm == nil {
		t.Fatalf("the page was not laid out (no measurement in the DOM):\n%.500s", dom)
	}
	var m measure
	if err := json.Unmarshal([]byte(html.UnescapeString(string(mm[1]))), &m); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %+v", size, m)
	return m, report
}

// The report of a noisy sweep, rendered by headless Chromium at 1280×800:
// no sideways scrolling, text of readable size, charts drawn at a
// readable width, headline numbers inside their cards, and a screenshot
// that shows the headline's colours.
func TestBrowserReadableAt1280x800(t *testing.T) {
	bin := chromium(t)
	db := resultstest.Open(t, resultstest.NoisySpec())
	m, report := layout(t, bin, db, 1280)
	if m.ViewportWidth != 1280 || m.ScrollWidth > m.ViewportWidth {
		t.Errorf("page is %d px wide in a %d px window: it scrolls sideways", m.ScrollWidth, m.ViewportWidth)
	}
	if m.BodyFontPx < 14 || m.SmallestFontPx < 12 {
		t.Errorf("text too small: body %.1f px, smallest %.1f px", m.BodyFontPx, m.SmallestFontPx)
	}
	// 48 charts, each drawn twice (wide and narrow), one of the two shown.
	if m.Charts != 96 || m.ChartsShown < 25 || m.ChartsShown > 48 {
		t.Errorf("%d charts, %d laid out; want 96 (48 × 2 layouts), at least the arm-on groups' 25, at most 48", m.Charts, m.ChartsShown)
	}
	if m.NarrowestChart < 340 || m.WidestChart > 660 || m.ShortestChart < 200 {
		t.Errorf("charts drawn %.0f to %.0f px wide, at least %.0f px high: want 340–660 wide, 200 high", m.NarrowestChart, m.WidestChart, m.ShortestChart)
	}
	if m.CountsOverflow != 0 || m.ChartsPastRight != 0 || m.BoxesPastRight != 0 {
		t.Errorf("%d headline numbers stick out of their card, %d charts and %d tables past the window's edge", m.CountsOverflow, m.ChartsPastRight, m.BoxesPastRight)
	}
	if m.LabelsOutside != 0 || m.ChartsFewLabels != 0 {
		t.Errorf("%d chart labels drawn outside their chart (%q), %d charts with fewer than 3 labels", m.LabelsOutside, m.Outside, m.ChartsFewLabels)
	}
	if !strings.Contains(m.Headline, "on vs off · fork step 2 · 400 pairs") || !strings.Contains(m.Headline, "McNemar exact p") {
		t.Errorf("first card reads %q", m.Headline)
	}
	dir := filepath.Dir(report)
	shot := filepath.Join(dir, "shot.png")
	headless(t, bin, "1280,800", "--screenshot="+shot, "file://"+report)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 800 {
		t.Fatalf("screenshot is %v, want 1280×800", b)
	}
	inked, blue, vermillion := pixels(img)
	total := 1280 * 800
	t.Logf("screenshot: %.1f%% inked, %d rescue-blue and %d harm-vermillion pixels", 100*float64(inked)/float64(total), blue, vermillion)
	if inked < total/50 {
		t.Errorf("screenshot is nearly blank: %d of %d pixels not white", inked, total)
	}
	if blue < 500 || vermillion < 500 {
		t.Errorf("the headline's rescued and harmed colours are missing: %d blue, %d vermillion pixels", blue, vermillion)
	}
}

// pixels counts the non-white pixels and those of the rescued blue
// (#0072B2) and harmed vermillion (#D55E00), within a small tolerance.
func pixels(img image.Image) (inked, blue, vermillion int) {
	near := func(r, g, b uint32, R, G, B int) bool {
		d := func(x uint32, y int) int {
			v := int(x>>8) - y
			if v < 0 {
				return -v
			}
			return v
		}
		return d(r, R) < 12 && d(g, G) < 12 && d(b, B) < 12
	}
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 < 245 || g>>8 < 245 || b>>8 < 245 {
				inked++
			}
			if near(r, g, b, 0x00, 0x72, 0xB2) {
				blue++
			}
			if near(r, g, b, 0xD5, 0x5E, 0x00) {
				vermillion++
			}
		}
	}
	return
}

// Issue 12 I: at 420 px (a phone) no chart or table runs past the window
// (wide tables scroll inside their box), and at 1280 px the configurations
// table of a grid sweep is whole or scrolls, never cut off.
func TestBrowserNarrowAndGrid(t *testing.T) {
	bin := chromium(t)
	db := resultstest.Open(t, resultstest.NoisySpec())
	m, _ := layout(t, bin, db, 420)
	if m.ViewportWidth != 420 || m.ScrollWidth > m.ViewportWidth || m.ChartsPastRight != 0 || m.BoxesPastRight != 0 || m.TablesPastCell != 0 {
		t.Errorf("at 420 px: page %d px wide, %d charts and %d tables past the edge, %d tables past their cell",
			m.ScrollWidth, m.ChartsPastRight, m.BoxesPastRight, m.TablesPastCell)
	}
	if m.NarrowestChart < 300 {
		t.Errorf("at 420 px a chart is drawn %.0f px wide", m.NarrowestChart)
	}
	if m.LabelsOutside != 0 || m.ChartsFewLabels != 0 {
		t.Errorf("at 420 px: %d chart labels drawn outside their chart (%q), %d charts with fewer than 3 labels", m.LabelsOutside, m.Outside, m.ChartsFewLabels)
	}
	spec := sweep.DefaultSpec()
	spec.Grid = map[string][]any{"p_stall": {0.0, 0.2}, "p_obs_noise": {0.0, 0.1}}
	m, _ = layout(t, bin, resultstest.Open(t, spec), 1280)
	if m.ConfigsScroll || m.TablesPastCell != 0 {
		t.Errorf("counter grid at 1280 px: the configurations table is cut (scrolls %v), %d tables past their cell", m.ConfigsScroll, m.TablesPastCell)
	}
	// toolloop's 21 parameters make the configurations table wide.
	spec = sweep.DefaultSpec()
	spec.World, spec.ForkAt, spec.Params, spec.Seeds = "toolloop", []int{2}, world.Params{}, sweep.Range{Start: 0, End: 200}
	spec.Grid = map[string][]any{"p_fault": {0.2, 0.4}}
	m, _ = layout(t, bin, resultstest.Open(t, spec), 1280)
	if m.ScrollWidth > m.ViewportWidth || m.ChartsPastRight != 0 || m.BoxesPastRight != 0 || m.TablesPastCell != 0 {
		t.Errorf("grid at 1280 px: page %d px wide, %d charts and %d tables past the edge, %d tables past their cell",
			m.ScrollWidth, m.ChartsPastRight, m.BoxesPastRight, m.TablesPastCell)
	}
}

// Issue 26: the report works on every screen. At a phone's 390 px and a
// desktop's 1280 px, opened as a reader opens it (every section unfolded),
// every text shown, in the page and in the charts, is at least minTextPx
// high; no table cell is clipped, by its own width or by its table's
// box; and every point of the policy frontier carries a hover title.
// At 390 px the charts were scaled-down desktop charts with text 5 px
// high, and at 1280 px the policy table's last column was cut at "-".
func TestBrowserEveryScreen(t *testing.T) {
	bin := chromium(t)
	// make sweep's: the default world, seeds 0:300, fork step 3.
	quick := sweep.DefaultSpec()
	quick.Seeds, quick.ForkAt = sweep.Range{Start: 0, End: 300}, []int{3}
	for _, tc := range []struct {
		name string
		spec sweep.Spec
	}{{"make sweep", quick}, {"noisy", resultstest.NoisySpec()}} {
		db := resultstest.Open(t, tc.spec)
		for _, width := range []int{390, 1280} {
			m, _ := layoutUnfolded(t, bin, db, width, true)
			if m.SmallestTextPx < minTextPx {
				t.Errorf("%s at %d px: text %.1f px high, want at least %v: %q", tc.name, width, m.SmallestTextPx, minTextPx, m.SmallTexts)
			}
			if len(m.ClippedCells) != 0 {
				t.Errorf("%s at %d px: table cells clipped: %q", tc.name, width, m.ClippedCells)
			}
			if m.FrontierPoints == 0 || m.Untitled != 0 {
				t.Errorf("%s at %d px: %d of %d frontier points without a hover title", tc.name, width, m.Untitled, m.FrontierPoints)
			}
		}
	}
}
