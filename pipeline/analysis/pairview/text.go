package pairview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/schemas"
)

// Title is the view's one-line title: "seed 5 · fork step 3 · on vs off ·
// replica 0" (a recorded run's: "run prod/s5 (seed 5) · …"), with the
// configuration when the sweep has several.
func (v *View) Title(configs int) string {
	who := fmt.Sprintf("seed %d", v.Seed)
	switch {
	case v.Recorded && v.NoSeed:
		who = "run " + v.RunID
	case v.Recorded:
		who = fmt.Sprintf("run %s (seed %d)", v.RunID, v.Seed)
	}
	t := fmt.Sprintf("%s · fork step %d · %s vs off · replica %d", who, v.ForkStep, v.Arm, v.Replica)
	if configs > 1 {
		t += fmt.Sprintf(" · config %d", v.Config)
	}
	return t
}

// Verdict says what the pair is and why: "rescued (persuadable): off
// failed, on succeeded", with the replicas' votes when there are several.
func (v *View) Verdict() string {
	p := &v.Pair
	if p.Status != schemas.StatusOK {
		return "error (not labelled, not counted): " + p.Error
	}
	q := strings.ReplaceAll(p.Quadrant, "_", " ")
	how := fmt.Sprintf("off %s, %s %s", verb(p.ControlSuccess), v.Arm, verb(p.TreatmentSuccess))
	if p.ControlSuccess == p.TreatmentSuccess {
		how = "both " + verb(p.ControlSuccess)
	}
	s := fmt.Sprintf("%s (%s): %s", p.Label, q, how)
	if p.Replicas > 1 {
		s += fmt.Sprintf(" by majority of %d replicas (off won %d, %s %d)", p.Replicas, p.ControlWins, v.Arm, p.TreatmentWins)
	}
	return s
}

func verb(ok bool) string {
	if ok {
		return "succeeded"
	}
	return "failed"
}

// SideTitle names a column: "off (control)", "on (treated)", and for the
// policy arm whether its rule fired.
func (b *Branch) SideTitle() string {
	switch {
	case b.Arm == fork.Off:
		return "off (control)"
	case b.Arm == fork.Policy && b.Intervened:
		return "policy (treated; its rule fired)"
	case b.Arm == fork.Policy:
		return "policy (treated; its rule did not fire)"
	}
	return string(b.Arm) + " (treated)"
}

// Outcome is the branch's end: "succeeded · cost steps 5", or its error.
func (b *Branch) Outcome(d *world.Declaration) string {
	if b.Status != schemas.StatusOK {
		return "error: " + b.Error
	}
	return verb(b.Success) + " · cost " + CostText(d, b.Cost)
}

// CostText words a cost in the fields d's cost model reports: "steps 5,
// tokens 1230".
func CostText(d *world.Declaration, c world.Cost) string {
	var parts []string
	for _, f := range world.CostFields {
		if d.Cost.Reports(f) {
			parts = append(parts, f+" "+strconv.FormatFloat(c.Field(f), 'f', -1, 64))
		}
	}
	return strings.Join(parts, ", ")
}

// Values words declared values: "same_obs true · repeat_run 2".
func Values(fs []world.Field, vs []world.Value) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		t := "null"
		if i < len(vs) && !vs[i].Null {
			t = vs[i].Text(f.Kind)
		}
		parts[i] = f.Name + " " + t
	}
	return strings.Join(parts, " · ")
}

// StepNumber is the step column of position i: the step count after it
// when a transcript says so, else "+i" after the fork.
func (v *View) StepNumber(i int) string {
	for _, b := range []*Branch{&v.Control, &v.Treated} {
		if i < len(b.Steps) && b.Steps[i].Step != nil {
			return strconv.FormatInt(*b.Steps[i].Step, 10)
		}
	}
	return fmt.Sprintf("+%d", i+1)
}

// Rows is the number of step rows: the longer branch's steps.
func (v *View) Rows() int { return max(len(v.Control.Steps), len(v.Treated.Steps)) }

// Text words a step: "refresh (intervention) → obs 3 · steps 4", with its
// tool call, tool result and cost when it has them (a cost of one step and
// nothing else is every step's, and left out).
func (st Step) Text() string {
	s := st.Action
	if st.Intervention {
		s += " (intervention)"
	}
	if st.ToolCall != nil {
		s += " · call " + st.ToolCall.Name
		if len(st.ToolCall.Arguments) > 0 {
			s += " " + jsonText(st.ToolCall.Arguments)
		}
	}
	if len(st.ToolResult) > 0 {
		s += " · result " + jsonText(st.ToolResult)
	}
	if len(st.Observation) > 0 {
		s += " → " + jsonText(st.Observation)
	}
	if c := st.CostText(); c != "" {
		s += " [" + c + "]"
	}
	return s
}

// CostText words a step's cost ("tokens 230"), "" for one step alone.
func (st Step) CostText() string {
	var c map[string]json.Number
	d := json.NewDecoder(bytes.NewReader(st.Cost))
	d.UseNumber()
	if len(st.Cost) == 0 || d.Decode(&c) != nil {
		return ""
	}
	var parts []string
	for _, f := range world.CostFields {
		n, ok := c[f]
		if !ok || f == world.CostSteps && n == "1" {
			continue
		}
		parts = append(parts, f+" "+n.String())
	}
	return strings.Join(parts, ", ")
}

// jsonText words a JSON value: an object's members as "key value · key
// value" (nested values as compact JSON), a string as itself, anything
// else as compact JSON.
func jsonText(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	var s string
	if json.Unmarshal(b.Bytes(), &s) == nil {
		return s
	}
	d := json.NewDecoder(bytes.NewReader(b.Bytes()))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return b.String()
	}
	var parts []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return b.String()
		}
		var val json.RawMessage
		if d.Decode(&val) != nil {
			return b.String()
		}
		t := string(val)
		if json.Unmarshal(val, &s) == nil {
			t = s
		}
		parts = append(parts, fmt.Sprint(k)+" "+t)
	}
	return strings.Join(parts, " · ")
}

// partText says where the branches part.
func (v *View) partText() string {
	switch {
	case v.Control.Steps == nil && v.Treated.Steps == nil:
		return ""
	case v.Part < 0:
		return "The branches never part: they take the same steps to the same end."
	case v.Part == 0:
		return fmt.Sprintf("» They part at step %s, the first after the fork.", v.StepNumber(0))
	}
	return fmt.Sprintf("» They part at step %s, the %s step after the fork.", v.StepNumber(v.Part), ordinal(v.Part+1))
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// sourceText says where the steps come from.
func (v *View) sourceText() string {
	if v.Replayed {
		return "Steps replayed from the checkpoint: the sweep kept no transcripts (forklab sweep --transcripts keeps them), and a built-in world replays its branches exactly."
	}
	return ""
}

// cellWidth bounds a column of the text view; longer cells wrap.
const cellWidth = 46

// Write prints v: the pair's verdict, the checkpoint, the two branches
// side by side step by step with the parting step marked (») and each
// one's outcome and cost.
func Write(w io.Writer, v *View, configs int) error {
	var b strings.Builder
	d := &v.Decl
	fmt.Fprintf(&b, "%s\nworld %s, version %s\npair: %s\n\n", v.Title(configs), d.Name, d.Version, v.Verdict())
	c := &v.Checkpoint
	fmt.Fprintf(&b, "checkpoint at fork step %d", v.ForkStep)
	if c.Over {
		b.WriteString(" (the run had ended before it)")
	}
	b.WriteString("\n")
	if c.Status != schemas.StatusOK {
		fmt.Fprintf(&b, "  error     %s\n", c.Error)
	} else {
		if len(c.History) > 0 {
			names := make([]string, len(c.History))
			for i, t := range c.History {
				names[i] = t.Action
			}
			fmt.Fprintf(&b, "  history   %s\n", strings.Join(names, ", "))
		}
		fmt.Fprintf(&b, "  features  %s\n  hidden    %s\n  cost      %s\n", Values(d.Features, c.Features), Values(d.Hidden, c.Hidden), CostText(d, c.Cost))
	}
	b.WriteString("\n")
	rows := [][3]string{{"step", v.Control.SideTitle(), v.Treated.SideTitle()}}
	marks := []bool{false}
	for i := range v.Rows() {
		row := [3]string{v.StepNumber(i), "", ""}
		for k, br := range []*Branch{&v.Control, &v.Treated} {
			if i < len(br.Steps) {
				row[k+1] = br.Steps[i].Text()
			} else {
				row[k+1] = "(ended)"
			}
		}
		rows = append(rows, row)
		marks = append(marks, i == v.Part)
	}
	rows = append(rows, [3]string{"end", v.Control.Outcome(d), v.Treated.Outcome(d)})
	marks = append(marks, false)
	writeColumns(&b, rows, marks)
	for _, l := range []string{v.partText(), v.sourceText(), v.Note} {
		if l != "" {
			fmt.Fprintf(&b, "\n%s", l)
		}
	}
	for _, br := range []*Branch{&v.Control, &v.Treated} {
		if len(br.Details) > 0 {
			fmt.Fprintf(&b, "\n%s details: %s", br.Arm, br.Details)
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeColumns lays rows out in three columns, the last two wrapped at
// cellWidth, a » before the marked rows.
func writeColumns(b *strings.Builder, rows [][3]string, marks []bool) {
	var width [3]int
	cells := make([][3][]string, len(rows))
	for r, row := range rows {
		for k, text := range row {
			lim := cellWidth
			if k == 0 {
				lim = 8
			}
			cells[r][k] = wrap(text, lim)
			for _, l := range cells[r][k] {
				width[k] = max(width[k], utf8.RuneCountInString(l))
			}
		}
	}
	for r := range cells {
		lines := max(len(cells[r][0]), len(cells[r][1]), len(cells[r][2]))
		for l := range lines {
			mark := "  "
			if marks[r] && l == 0 {
				mark = "» "
			}
			line := mark
			for k := range 3 {
				t := ""
				if l < len(cells[r][k]) {
					t = cells[r][k][l]
				}
				if k < 2 {
					t += strings.Repeat(" ", width[k]-utf8.RuneCountInString(t)+2)
				}
				line += t
			}
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
	}
}

// wrap cuts text into lines of at most n runes, at spaces where it can.
func wrap(text string, n int) []string {
	var lines []string
	for utf8.RuneCountInString(text) > n {
		r := []rune(text)
		cut := n
		for i := n; i > n/2; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		lines = append(lines, strings.TrimRight(string(r[:cut]), " "))
		text = strings.TrimLeft(string(r[cut:]), " ")
	}
	return append(lines, text)
}
