package htmlreport

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"image/color"
	"regexp"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Colours: the Okabe–Ito palette, which stays distinct for the common
// colour-vision deficiencies (Okabe & Ito, "Color Universal Design", 2008).
var (
	colRescued = color.RGBA{0x00, 0x72, 0xB2, 0xFF} // blue
	colHarmed  = color.RGBA{0xD5, 0x5E, 0x00, 0xFF} // vermillion
	colNet     = color.RGBA{0x11, 0x11, 0x11, 0xFF}
	colMuted   = color.RGBA{0x99, 0x99, 0x99, 0xFF}
	colLines   = []color.Color{
		color.RGBA{0x00, 0x72, 0xB2, 0xFF}, // blue
		color.RGBA{0xE6, 0x9F, 0x00, 0xFF}, // orange
		color.RGBA{0x00, 0x9E, 0x73, 0xFF}, // bluish green
		color.RGBA{0xCC, 0x79, 0xA7, 0xFF}, // reddish purple
		color.RGBA{0x56, 0xB4, 0xE9, 0xFF}, // sky blue
		color.RGBA{0xD5, 0x5E, 0x00, 0xFF}, // vermillion
	}
)

// newPlot is a plot in the report's style: sans-serif text (Liberation
// Sans, metric-compatible with Arial), a light grid, no title (the page
// gives it), sizes for a chart shown about as wide as its canvas.
func newPlot(xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.BackgroundColor = color.White
	for _, ts := range []*draw.TextStyle{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
		&p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		ts.Font.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = 13
	p.X.Label.TextStyle.Font.Size = 11
	p.Y.Label.TextStyle.Font.Size = 11
	p.X.Tick.Label.Font.Size = 10
	p.Y.Tick.Label.Font.Size = 10
	p.Legend.TextStyle.Font.Size = 10
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.X.Padding, p.Y.Padding = vg.Points(4), vg.Points(4)
	return p
}

var (
	svgProlog = regexp.MustCompile(`(?s)^<\?xml[^>]*\?>\s*(<!--.*?-->\s*)?`)
	svgOpen   = regexp.MustCompile(`(?s)^<svg width="([^"]*)pt" height="([^"]*)pt" viewBox="([^"]*)"[^>]*>`)
	fontFam   = regexp.MustCompile(`font-family:([^;"]+);`)
)

// A chartLayout is the canvas a chart is drawn on. Every chart is drawn twice:
// wide, for a box about as wide as its canvas, and narrow, re-laid for a
// phone (a canvas about as wide as a phone's column, so its text keeps
// about its size there: fewer ticks, turned labels, shorter titles). The
// page's CSS shows the one that fits its figure (a container query at
// narrowBelow).
type chartLayout struct {
	narrow bool
	w, h   vg.Length
}

// narrowBelow is the width (CSS px) of a figure below which its charts'
// narrow layout is shown: a wide canvas of 560 units is then still drawn
// at 0.96 px per unit or more, so its 10-unit ticks stay above 9 px. It
// must match style.css's @container rule.
const narrowBelow = 540

// narrowWidth is the canvas width of every narrow layout (units of the
// viewBox): at a 360 px phone's 320 px column one unit is one px.
const narrowWidth = 320

// wide and narrow are the two layouts of a chart whose wide canvas is
// w × h and narrow one narrowWidth × nh.
func layouts(w, h, nh vg.Length) [2]chartLayout {
	return [2]chartLayout{{w: w, h: h}, {narrow: true, w: narrowWidth, h: nh}}
}

// both draws a chart in each of its layouts and returns them side by
// side, the page showing one.
func both(ls [2]chartLayout, draw func(chartLayout) (template.HTML, error)) (template.HTML, error) {
	var out template.HTML
	for _, l := range ls {
		s, err := draw(l)
		if err != nil {
			return "", err
		}
		out += s
	}
	return out, nil
}

// An overlay is a plotter that draws raw SVG elements (a point with its
// <title>, which gonum/plot cannot draw) at its place among the plot's
// plotters: over those added before it, under those added after. draw
// gets the transforms from data to canvas coordinates (points, y up, as
// inside vgsvg's flipped top group). It leaves a marker text in the
// canvas, which svgOf replaces with what draw returned.
type overlay struct {
	draw func(x, y func(float64) vg.Length) string
	svg  string
}

// overlayMark is the marker text an overlay leaves; no label holds it.
const overlayMark = "@@forklab-overlay@@"

var overlayText = regexp.MustCompile(`<text\b[^<]*>` + overlayMark + `</text>\n?`)

// Plot implements plot.Plotter.
func (o *overlay) Plot(c draw.Canvas, p *plot.Plot) {
	x, y := p.Transforms(&c)
	o.svg = o.draw(x, y)
	sty := p.X.Tick.Label
	sty.Rotation = 0
	c.FillText(sty, vg.Point{}, overlayMark)
}

// svgOf draws p on l's canvas (points) and returns it as inline SVG
// for an HTML page: no XML prolog, no namespace declarations (the HTML
// parser puts <svg> in the SVG namespace itself, and the page must hold no
// URL at all), scaled to its container by its viewBox, with a title and
// an accessible label, classes naming its layout (wide or narrow) and
// kind, and the plot's Liberation fonts backed by the
// metric-compatible Arial and Helvetica and any sans-serif font, all local.
// over, when not nil, is an overlay added to p, its marker replaced by its
// elements.
// A panic of gonum/plot while drawing is returned as an error naming the
// chart.
func svgOf(p *plot.Plot, l chartLayout, kind, label string, over *overlay) (_ template.HTML, err error) {
	c := vgsvg.New(l.w, l.h)
	// gonum/plot panics on what it cannot draw (a log axis reaching 0):
	// an error naming the chart, not a crash of forklab report.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("render chart %q: %v", label, r)
		}
	}()
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("render chart %q: %w", label, err)
	}
	s := svgProlog.ReplaceAllString(buf.String(), "")
	m := svgOpen.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("render chart %q: unexpected SVG header %.80q", label, s)
	}
	class := "wide"
	if l.narrow {
		class = "narrow"
	}
	if kind != "" {
		class += " " + kind
	}
	esc := html.EscapeString(label)
	s = fmt.Sprintf(`<svg class="chart %s" viewBox="%s" width="%s" height="%s" role="img" aria-label="%s"><title>%s</title>`,
		class, m[3], m[1], m[2], esc, esc) + s[len(m[0]):]
	if over != nil {
		if n := len(overlayText.FindAllString(s, -1)); n != 1 {
			return "", fmt.Errorf("render chart %q: %d overlay markers, want 1", label, n)
		}
		s = overlayText.ReplaceAllLiteralString(s, over.svg)
	}
	s = fontFam.ReplaceAllStringFunc(s, func(f string) string {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "font-family:"), ";")
		return "font-family:'" + name + "',Arial,Helvetica,sans-serif;"
	})
	return template.HTML(s), nil
}
