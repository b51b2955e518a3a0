package htmlreport

import (
	"fmt"
	"github.com/forklab/forklab/pipeline/analysis/results"
	"html/template"
	"image/color"
	"math"
	"sort"
	"strconv"

	"github.com/forklab/forklab/pipeline/analysis/search"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// niceTicks puts labelled ticks at round steps (1, 2 or 5 × 10^k, about
// five across the range, zero among them when in range; or every step when
// step is set) and unlabelled ones halfway, labelled by label.
type niceTicks struct {
	label func(float64) string
	step  float64
}

func (t niceTicks) Ticks(min, max float64) []plot.Tick {
	if !finite(min) || !finite(max) || max < min {
		// An axis over an infinite or empty range has no ticks: the loop
		// below would never end (an HTML report grew to 24 GB on one).
		return nil
	}
	step := t.step
	if step <= 0 || (max-min)/step > maxTicks {
		step = niceStep((max - min) / 5)
	}
	var ticks []plot.Tick
	for i := math.Ceil(min / step * 2); i/2*step <= max && len(ticks) < 2*maxTicks; i++ {
		v := i / 2 * step
		tick := plot.Tick{Value: v}
		if math.Mod(i, 2) == 0 {
			tick.Label = t.label(v)
		}
		ticks = append(ticks, tick)
	}
	return ticks
}

// maxTicks bounds the labelled ticks of an axis, whatever its range.
const maxTicks = 100

// finite says x is neither infinite nor NaN.
func finite(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }

// niceStep is the smallest of 1, 2, 5 × 10^k at least x.
func niceStep(x float64) float64 {
	if !(x > 0) {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5} {
		if x <= m*e*(1+1e-9) {
			return m * e
		}
	}
	return 10 * e
}

// logTicks labels a log axis at 1, 2 and 5 × 10^k, with unlabelled ticks
// at the other whole multiples. A range that holds fewer than two of
// those (a CI width between 7% and 19%, say) has every whole multiple
// labelled, or, within a single step, round linear ticks: an axis always
// has at least two labels to read it by.
type logTicks struct{ label func(float64) string }

func (t logTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !finite(max) || max < min {
		// log10(0) is −Inf: the loop below would never end.
		return niceTicks{label: t.label}.Ticks(min, max)
	}
	var ticks []plot.Tick
	labelled := 0
	for k := math.Floor(math.Log10(min)); k <= math.Ceil(math.Log10(max)); k++ {
		for m := 1.0; m <= 9; m++ {
			v := m * math.Pow(10, k)
			if v < min*(1-1e-9) || v > max*(1+1e-9) {
				continue
			}
			tick := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				tick.Label = t.label(v)
				labelled++
			}
			ticks = append(ticks, tick)
		}
	}
	if labelled >= 2 {
		return ticks
	}
	if len(ticks) >= 2 {
		for i := range ticks {
			ticks[i].Label = t.label(ticks[i].Value)
		}
		return ticks
	}
	return niceTicks{label: t.label}.Ticks(min, max)
}

// Tick labels.
var (
	absLabel = func(v float64) string { return strconv.FormatFloat(math.Abs(roundTo(v)), 'f', -1, 64) }
	numLabel = func(v float64) string { return strconv.FormatFloat(roundTo(v), 'f', -1, 64) }
	pctLabel = func(v float64) string { return strconv.FormatFloat(roundTo(100*v), 'f', -1, 64) + "%" }
)

// roundTo removes floating-point noise from a tick value (0.30000000000000004).
// Adding zero turns -0 into 0.
func roundTo(v float64) float64 { return math.Round(v*1e9)/1e9 + 0 }

// sliceChart draws one feature's slices as diverging bars: rescued pairs
// upwards, harmed pairs downwards, the net as a black diamond, so a value
// where rescues and harms cancel shows two long bars and a net near zero.
func sliceChart(feature string, rs []results.Row) (template.HTML, error) {
	p := newPlot("", "pairs  (▲ rescued · ▼ harmed)")
	var up, down plotter.Values
	var net plotter.XYs
	var labels []string
	lo, hi := 0.0, 0.0
	for i, r := range rs {
		up = append(up, float64(r.Int("rescued")))
		down = append(down, -float64(r.Int("harmed")))
		net = append(net, plotter.XY{X: float64(i), Y: float64(r.Int("net"))})
		labels = append(labels, r.Str("value"))
		lo, hi = math.Min(lo, -float64(r.Int("harmed"))), math.Max(hi, float64(r.Int("rescued")))
	}
	width := vg.Points(math.Min(36, 240/float64(max(len(rs), 1))))
	for _, b := range []struct {
		vals plotter.Values
		col  color.Color
	}{{up, colRescued}, {down, colHarmed}} {
		bars, err := plotter.NewBarChart(b.vals, width)
		if err != nil {
			return "", err
		}
		bars.LineStyle.Width = 0
		bars.Color = b.col
		p.Add(bars)
	}
	zero := plotter.NewFunction(func(float64) float64 { return 0 })
	zero.Color = colNet
	zero.Width = vg.Points(0.6)
	p.Add(zero)
	dots, err := plotter.NewScatter(net)
	if err != nil {
		return "", err
	}
	dots.GlyphStyle = draw.GlyphStyle{Color: colNet, Radius: vg.Points(3.5), Shape: draw.PyramidGlyph{}}
	p.Add(dots)
	p.NominalX(labels...)
	p.X.Tick.Label.Font.Size = 10
	// Long labels (quantile buckets: "[1440, 1750)") or many of them are
	// turned, so they neither overlap nor run off the chart.
	long := 0
	for _, l := range labels {
		long = max(long, len([]rune(l)))
	}
	if long*len(labels) > 48 {
		p.X.Tick.Label.Rotation = math.Pi / 5
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YCenter
	}
	// The axis runs out to whole labelled steps on each side that has
	// bars, so the rescued half and the harmed half each carry a label
	// (a bar just short of the next round number left its half bare).
	step := niceStep(math.Max(hi-lo, 1) / 5)
	p.Y.Tick.Marker = niceTicks{label: absLabel, step: step}
	pad := math.Max(1, 0.08*(hi-lo))
	p.Y.Min, p.Y.Max = lo-pad, hi+pad
	if hi > 0 {
		p.Y.Max = math.Max(p.Y.Max, math.Ceil(hi/step)*step+0.02*step)
	}
	if lo < 0 {
		p.Y.Min = math.Min(p.Y.Min, math.Floor(lo/step)*step-0.02*step)
	}
	p.X.Min, p.X.Max = -0.6, float64(len(rs))-0.4
	return svgOf(p, vg.Points(360), vg.Points(240), fmt.Sprintf("%s: rescued (up) and harmed (down) pairs per value, net as a triangle", feature))
}

// frontierChart plots every candidate trigger of the policy search as a
// point (harms, rescues) on one side of the split: filled when it keeps
// the search's harm cap, hollow when over it, larger where several
// triggers coincide; the upper-left envelope (most rescues for at most so
// many harms) as a step line; the chosen trigger ringed and named, the
// baselines always and never named.
func frontierChart(r *search.Group, holdout bool) (template.HTML, error) {
	side := func(c search.Candidate) search.Side {
		if holdout {
			return c.Holdout
		}
		return c.Search
	}
	title := "search seeds"
	if holdout {
		title = "held-out seeds"
	}
	p := newPlot("harmed pairs ("+title+")", "rescued pairs")
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{label: numLabel}, niceTicks{label: numLabel}
	type key struct {
		x, y   int64
		within bool
	}
	count := map[key]int{}
	var maxX, maxY float64
	for _, c := range r.Candidates {
		s := side(c)
		count[key{s.Harmed, s.Rescued, c.WithinCap}]++
		maxX, maxY = math.Max(maxX, float64(s.Harmed)), math.Max(maxY, float64(s.Rescued))
	}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].x != keys[j].x {
			return keys[i].x < keys[j].x
		}
		if keys[i].y != keys[j].y {
			return keys[i].y < keys[j].y
		}
		return !keys[i].within && keys[j].within
	})
	// The envelope: most rescues among candidates with at most x harms.
	var env plotter.XYs
	best := -1.0
	for _, k := range keys {
		if float64(k.y) > best {
			if len(env) > 0 {
				env = append(env, plotter.XY{X: float64(k.x), Y: env[len(env)-1].Y})
			}
			env = append(env, plotter.XY{X: float64(k.x), Y: float64(k.y)})
			best = float64(k.y)
		}
	}
	if len(env) > 0 {
		env = append(env, plotter.XY{X: maxX*1.04 + 0.5, Y: best})
		line, err := plotter.NewLine(env)
		if err != nil {
			return "", err
		}
		line.Color, line.Width, line.Dashes = colMuted, vg.Points(1), []vg.Length{vg.Points(3), vg.Points(2)}
		p.Add(line)
	}
	for _, within := range []bool{false, true} {
		var pts plotter.XYs
		var sizes []int
		for _, k := range keys {
			if k.within == within {
				pts = append(pts, plotter.XY{X: float64(k.x), Y: float64(k.y)})
				sizes = append(sizes, count[k])
			}
		}
		if len(pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return "", err
		}
		glyph := draw.GlyphStyle{Color: colRescued, Shape: draw.CircleGlyph{}}
		if !within {
			glyph = draw.GlyphStyle{Color: colMuted, Shape: draw.RingGlyph{}}
		}
		sc.GlyphStyleFunc = func(i int) draw.GlyphStyle {
			g := glyph
			g.Radius = vg.Points(2.5 + 1.2*math.Sqrt(float64(sizes[i]-1)))
			return g
		}
		sc.GlyphStyle = glyph
		sc.GlyphStyle.Radius = vg.Points(3)
		p.Add(sc)
	}
	// The chosen trigger and the baselines, named.
	var marks plotter.XYs
	var names []string
	for _, c := range append([]search.Candidate{r.Chosen}, r.Baselines...) {
		if c.Trigger != "always" && c.Trigger != "never" && c.Trigger != r.Chosen.Trigger {
			continue
		}
		s := side(c)
		name := c.Trigger
		if c.Trigger == r.Chosen.Trigger {
			name = "chosen: " + c.Trigger
			if len(marks) > 0 {
				continue
			}
		}
		marks = append(marks, plotter.XY{X: float64(s.Harmed), Y: float64(s.Rescued)})
		names = append(names, "  "+name)
	}
	ring, err := plotter.NewScatter(marks[:1])
	if err != nil {
		return "", err
	}
	ring.GlyphStyle = draw.GlyphStyle{Color: colHarmed, Radius: vg.Points(8), Shape: draw.RingGlyph{}}
	p.Add(ring)
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: marks, Labels: names})
	if err != nil {
		return "", err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Font.Variant = "Sans"
		labels.TextStyle[i].Font.Size = 11
		labels.TextStyle[i].YAlign = draw.YCenter
		if marks[i].X > 0.6*maxX && maxX > 0 {
			labels.TextStyle[i].XAlign = draw.XRight
			names[i] = names[i][2:] + "  "
		}
	}
	labels.Labels = names
	p.Add(labels)
	p.X.Min, p.Y.Min = -0.5, -0.5
	p.X.Max, p.Y.Max = maxX*1.04+0.5, maxY*1.08+0.5
	return svgOf(p, vg.Points(560), vg.Points(340), fmt.Sprintf("policy frontier on the %s: each candidate trigger's harmed against rescued pairs; chosen: %s", title, r.Chosen.Trigger))
}

// qiniChart draws the uplift (Qini) curve: cumulative net (rescued −
// harmed) as recovery fires on more held-out pairs, best-scored first,
// against firing the same share at random.
func qiniChart(rs []results.Row) (template.HTML, error) {
	p := newPlot("share of held-out pairs fired, best-scored first", "net pairs (rescued − harmed)")
	var curve, random plotter.XYs
	for _, r := range rs {
		curve = append(curve, plotter.XY{X: r.Float("fire_rate"), Y: r.Float("net")})
		random = append(random, plotter.XY{X: r.Float("fire_rate"), Y: r.Float("random_net")})
	}
	rl, err := plotter.NewLine(random)
	if err != nil {
		return "", err
	}
	rl.Color, rl.Width, rl.Dashes = colMuted, vg.Points(1.2), []vg.Length{vg.Points(4), vg.Points(3)}
	line, pts, err := plotter.NewLinePoints(curve)
	if err != nil {
		return "", err
	}
	line.Color, line.Width = colRescued, vg.Points(2)
	pts.GlyphStyle = draw.GlyphStyle{Color: colRescued, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
	zero := plotter.NewFunction(func(float64) float64 { return 0 })
	zero.Color, zero.Width = colNet, vg.Points(0.5)
	p.Add(zero, rl, line, pts)
	lo, hi := 0.0, 0.0
	for i := range curve {
		lo, hi = math.Min(lo, math.Min(curve[i].Y, random[i].Y)), math.Max(hi, math.Max(curve[i].Y, random[i].Y))
	}
	pad := math.Max(1, 0.06*(hi-lo))
	p.Y.Min, p.Y.Max = lo-pad, hi+pad
	p.Y.Tick.Marker = niceTicks{label: numLabel}
	p.X.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
		var t []plot.Tick
		for i := 0; i <= 10; i++ {
			label := ""
			if i%2 == 0 {
				label = fmt.Sprintf("%d%%", i*10)
			}
			t = append(t, plot.Tick{Value: float64(i) / 10, Label: label})
		}
		return t
	})
	return svgOf(p, vg.Points(560), vg.Points(320), "uplift (Qini) curve: cumulative net on held-out pairs as recovery fires on more of them, against random firing")
}

// convergenceCharts draws, for one (configuration, fork step, arm), how
// the net rate with its 95% interval and the interval's width change with
// the number of seeds (log scale), one line per number of replicas voted.
func convergenceCharts(rs []results.Row) (netRate, width template.HTML, legend []legendItem, err error) {
	byK := map[int64][]results.Row{}
	var ks []int64
	for _, r := range rs {
		k := r.Int("replicas_voted")
		if _, ok := byK[k]; !ok {
			ks = append(ks, k)
		}
		byK[k] = append(byK[k], r)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	pn := newPlot("seeds (log scale)", "net rate with 95% CI")
	pw := newPlot("seeds (log scale)", "width of the 95% CI (log scale)")
	for _, p := range []*plot.Plot{pn, pw} {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{numLabel}
	}
	pw.Y.Scale = plot.LogScale{}
	pw.Y.Tick.Marker = logTicks{pctLabel}
	pn.Y.Tick.Marker = niceTicks{label: pctLabel}
	zero := plotter.NewFunction(func(float64) float64 { return 0 })
	zero.Color, zero.Width = colNet, vg.Points(0.5)
	pn.Add(zero)
	for j, k := range ks {
		col := colLines[j%len(colLines)]
		name := fmt.Sprintf("majority of %d replica", k)
		if k != 1 {
			name += "s"
		}
		legend = append(legend, legendItem{Color: hexColor(col), Label: name})
		// Spread the replica counts a little along x so their intervals
		// do not hide one another.
		dodge := math.Pow(1.06, float64(j)-float64(len(ks)-1)/2)
		var rate, wid plotter.XYs
		var errs plotter.YErrors
		for _, r := range byK[k] {
			x := r.Float("seeds")
			rate = append(rate, plotter.XY{X: x * dodge, Y: r.Float("net_rate")})
			errs = append(errs, struct{ Low, High float64 }{r.Float("net_rate") - r.Float("net_lo"), r.Float("net_hi") - r.Float("net_rate")})
			w := r.Float("ci_width")
			if !(w > 1e-6) { // a NaN too: a log scale takes only values above 0
				w = 1e-6
			}
			wid = append(wid, plotter.XY{X: x, Y: w})
		}
		l, pts, err := plotter.NewLinePoints(rate)
		if err != nil {
			return "", "", nil, err
		}
		l.Color, l.Width = col, vg.Points(1.2)
		pts.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{rate, errs})
		if err != nil {
			return "", "", nil, err
		}
		eb.Color, eb.Width, eb.CapWidth = col, vg.Points(1), vg.Points(4)
		pn.Add(l, pts, eb)
		l2, pts2, err := plotter.NewLinePoints(wid)
		if err != nil {
			return "", "", nil, err
		}
		l2.Color, l2.Width = col, vg.Points(1.2)
		pts2.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
		pw.Add(l2, pts2)
	}
	for _, a := range []*plot.Axis{&pn.X, &pw.X, &pw.Y} {
		logRange(a)
	}
	if netRate, err = svgOf(pn, vg.Points(560), vg.Points(300), "net rate with its 95% interval by number of seeds, one line per number of replicas voted"); err != nil {
		return "", "", nil, err
	}
	width, err = svgOf(pw, vg.Points(560), vg.Points(300), "width of the net rate's 95% interval by number of seeds, one line per number of replicas voted")
	return netRate, width, legend, err
}

// logRange widens a log-scale axis whose data is one value (one number of
// seeds, or one interval width for every line) by a factor of 2 each way.
// gonum/plot would widen it by 1 each way, below zero for a value under 1,
// and its log scale panics on that.
func logRange(a *plot.Axis) {
	if a.Min == a.Max {
		a.Min, a.Max = a.Min/2, a.Max*2
	}
}

// legendItem is one entry of a chart's legend, drawn by the page in HTML
// so that it never covers the data.
type legendItem struct{ Color, Label string }

func hexColor(c color.Color) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02X%02X%02X", r>>8, g>>8, b>>8)
}
