package pairview

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/schemas"
)

//go:embed view.html
var viewHTML string

// CSS is the style of a view, scoped under the class pairview: a page
// that embeds fragments (the HTML report) includes it once.
//
//go:embed pairview.css
var CSS string

var viewTmpl = template.Must(template.New("view").Parse(viewHTML))

// htmlView is what the template shows.
type htmlView struct {
	ID, Title, World, Dir, Verdict, Label string
	ForkStep                              int
	Over                                  bool
	CheckpointError                       string
	History, Features, Hidden, Cost       string
	ControlTitle, TreatedTitle            string
	ControlOutcome, TreatedOutcome        string
	Rows                                  []htmlRow
	Notes                                 []string
	CSS                                   template.CSS
}

type htmlRow struct {
	N     string
	Part  bool
	Cells [2]htmlCell
}

type htmlCell struct {
	Ended                   bool
	Action                  string
	Intervention            bool
	Call, Result, Obs, Cost string
}

func (v *View) html(id, dir string, configs int) *htmlView {
	d := &v.Decl
	h := &htmlView{ID: id, Title: v.Title(configs), World: d.Name + ", version " + d.Version, Dir: dir, Verdict: v.Verdict(), Label: v.Pair.Label,
		ForkStep: v.ForkStep, Over: v.Checkpoint.Over,
		ControlTitle: v.Control.SideTitle(), TreatedTitle: v.Treated.SideTitle(),
		ControlOutcome: v.Control.Outcome(d), TreatedOutcome: v.Treated.Outcome(d)}
	c := &v.Checkpoint
	if c.Status != schemas.StatusOK {
		h.CheckpointError = c.Error
	} else {
		names := make([]string, len(c.History))
		for i, t := range c.History {
			names[i] = t.Action
		}
		h.History = strings.Join(names, ", ")
		h.Features, h.Hidden, h.Cost = Values(d.Features, c.Features), Values(d.Hidden, c.Hidden), CostText(d, c.Cost)
	}
	for i := range v.Rows() {
		r := htmlRow{N: v.StepNumber(i), Part: i == v.Part}
		for k, b := range []*Branch{&v.Control, &v.Treated} {
			if i >= len(b.Steps) {
				r.Cells[k].Ended = true
				continue
			}
			st := b.Steps[i]
			cell := htmlCell{Action: st.Action, Intervention: st.Intervention, Cost: st.CostText()}
			if st.ToolCall != nil {
				cell.Call = strings.TrimSpace(st.ToolCall.Name + " " + jsonText(st.ToolCall.Arguments))
			}
			if len(st.ToolResult) > 0 {
				cell.Result = jsonText(st.ToolResult)
			}
			if len(st.Observation) > 0 {
				cell.Obs = jsonText(st.Observation)
			}
			r.Cells[k] = cell
		}
		h.Rows = append(h.Rows, r)
	}
	for _, n := range []string{strings.TrimPrefix(v.partText(), "» "), v.sourceText(), v.Note} {
		if n != "" {
			h.Notes = append(h.Notes, n)
		}
	}
	for _, b := range []*Branch{&v.Control, &v.Treated} {
		if len(b.Details) > 0 {
			h.Notes = append(h.Notes, fmt.Sprintf("%s details: %s", b.Arm, b.Details))
		}
	}
	return h
}

// WriteHTML writes v as one self-contained HTML page (its style inline, no
// script, nothing fetched) of the results directory dir, whose sweep has
// configs configurations.
func WriteHTML(w io.Writer, v *View, dir string, configs int) error {
	h := v.html("", dir, configs)
	h.CSS = template.CSS(CSS)
	return viewTmpl.ExecuteTemplate(w, "page", h)
}

// Fragment is v as an HTML section with the given id, for a page that
// includes CSS (the HTML report embeds a few pairs of every slice).
func Fragment(v *View, id, dir string, configs int) (template.HTML, error) {
	var b bytes.Buffer
	if err := viewTmpl.ExecuteTemplate(&b, "fragment", v.html(id, dir, configs)); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil
}

// ID is an HTML id for the pair of a run: "pair-c0-f3-on-s5-r0" for
// seed 5 (run id "5"); a recorded run's is keyed by its run key
// (lab.RunKey: "pair-c0-f3-on-k1f2e…-r0"), since a run id may hold any
// character.
func ID(config, forkStep int, arm fork.Arm, runID string, replica int) string {
	if seed, err := strconv.ParseUint(runID, 10, 63); err == nil && strconv.FormatUint(seed, 10) == runID {
		return fmt.Sprintf("pair-c%d-f%d-%s-s%d-r%d", config, forkStep, arm, seed, replica)
	}
	return fmt.Sprintf("pair-c%d-f%d-%s-k%016x-r%d", config, forkStep, arm, lab.RunKey(runID), replica)
}

// RunName is the run id of v's run: its seed in decimal for a seed
// population.
func (v *View) RunName() string {
	if v.Recorded {
		return v.RunID
	}
	return strconv.FormatUint(v.Seed, 10)
}
