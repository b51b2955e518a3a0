// Package pairview shows one pair of a sweep the way a person reads it:
// the checkpoint a seed's run was forked at (its features, hidden truth and
// cost so far), then the control branch (off) and a treated branch side by
// side, step by step — action, observation, tool call and result, cost —
// with the step where they part marked, and the outcome and cost of each,
// under the pair's label (rescued, harmed, unchanged). forklab show prints
// it (Write) or writes it as a self-contained page (WriteHTML); the HTML
// report embeds a few rescued and harmed pairs of every slice (Fragment).
//
// A pair's rows are read straight from the one file of each table that
// holds its seed, by row number, never by scanning a table: a sweep's
// files are cut into units of consecutive seeds (sweep.Spec.ShardSeeds),
// each file holds its unit's seeds in order with a fixed number of rows per
// seed (one checkpoint; arms × replicas branches, off first; one pair per
// treatment arm), so the unit and the row follow from the seed, and
// parquet-go's offset index takes the reader to the page that holds the
// row. Opening a pair costs the same on a sweep of 300 seeds or of ten
// million (BenchmarkShowAtScale).
//
// The steps come from the branches table's transcript column when the
// sweep kept them (an agent that sent transcripts, a built-in world swept
// with --transcripts). Otherwise a built-in world's branch is played again
// from the checkpoint (lab.Replayer), which gives the sweep's branch exactly
// — the same outcome and cost are checked — since built-in worlds are
// deterministic; an external agent's branch without a transcript shows its
// outcome, cost and details only.
package pairview

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/schemas"
	"github.com/parquet-go/parquet-go"
)

// ErrNotInSweep marks a query for a pair the sweep does not hold: a seed,
// run id, configuration, fork step, arm or replica outside it. forklab
// show exits 2 on it.
var ErrNotInSweep = errors.New("not in the sweep")

// Query names one pair of a sweep: the treatment arm Arm against the
// control off at fork step ForkStep of seed Seed's run, in configuration
// Config, each side's replica Replica.
type Query struct {
	// Config is the configuration; -1 means the sweep's only one.
	Config int
	// Seed is the task seed, unless RunID is set.
	Seed uint64
	// RunID names the run instead of Seed. A seed population's runs are
	// its seeds and their run ids the seeds in decimal, as forklab-agent/1
	// spells a branch's run in its branch_id; a recorded population's
	// (forklab sweep --runs) are named only by their run ids.
	RunID string
	// ForkStep is the fork step; 0 means the sweep's only one.
	ForkStep int
	// Arm is the treatment arm; "" means the sweep's only one.
	Arm fork.Arm
	// Replica is the replica shown of each side, from 0.
	Replica int
}

// Sweep is a finished results directory opened for pair views. Open it
// with Open; it keeps the table files it read open until Close. It is
// used by one goroutine at a time.
type Sweep struct {
	Dir      string
	Manifest sweep.Manifest
	// arms are the plan's arms, off first (sweep.Resolved.Plan's order).
	arms  []fork.Arm
	files map[string]*tableFile
	// instances are the built-in world opened per configuration, for
	// replays (nil entries: not opened yet).
	instances map[int]lab.Instance
}

// Open opens the finished results directory dir: its manifest (an error
// wrapping sweep.ErrNotResults if it has none) checked against its files'
// presence and sizes (sweep.Verify; an error wrapping sweep.ErrMismatch if
// they differ), as report and sql do.
func Open(dir string) (*Sweep, error) {
	m, err := sweep.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if err := sweep.Verify(dir, m, false); err != nil {
		return nil, err
	}
	s := &Sweep{Dir: dir, Manifest: m, arms: []fork.Arm{fork.Off}, files: map[string]*tableFile{}, instances: map[int]lab.Instance{}}
	for _, a := range m.Spec.Arms {
		if a != fork.Off {
			s.arms = append(s.arms, a)
		}
	}
	return s, nil
}

// Close closes the files and world instances s opened.
func (s *Sweep) Close() error {
	for _, f := range s.files {
		f.f.Close()
	}
	for _, inst := range s.instances {
		if inst != nil {
			inst.Close()
		}
	}
	return nil
}

// Treatments lists the sweep's treatment arms, in the spec's order.
func (s *Sweep) Treatments() []fork.Arm { return s.arms[1:] }

// notInSweep is a query outside the sweep: its message names what the
// sweep holds, and it is ErrNotInSweep.
type notInSweep struct{ msg string }

func (e *notInSweep) Error() string        { return e.msg }
func (e *notInSweep) Is(target error) bool { return target == ErrNotInSweep }

func notIn(format string, args ...any) error { return &notInSweep{fmt.Sprintf(format, args...)} }

// Resolve fills q's defaults (the only configuration, fork step or arm)
// and checks every field against the sweep, naming what it holds: an
// error wrapping ErrNotInSweep.
func (s *Sweep) Resolve(q Query) (Query, error) {
	m := &s.Manifest
	switch {
	case q.Config == -1 && len(m.Configs) == 1:
		q.Config = 0
	case q.Config == -1:
		return q, notIn("the sweep has %d configurations (0 to %d): give one (--config)", len(m.Configs), len(m.Configs)-1)
	case q.Config < 0 || q.Config >= len(m.Configs):
		return q, notIn("configuration %d is not in the sweep: its configurations are 0 to %d", q.Config, len(m.Configs)-1)
	}
	switch {
	case m.Spec.Runs != nil && q.RunID == "":
		return q, notIn("the sweep's runs are recorded (%d runs of %s): name one by its run id (--run-id)", m.Spec.Runs.Count, m.Spec.Runs.Source)
	case m.Spec.Runs != nil:
		// Found in the files by Pair.
	case q.RunID != "":
		seed, err := strconv.ParseUint(q.RunID, 10, 63)
		if err != nil || strconv.FormatUint(seed, 10) != q.RunID {
			return q, notIn("run id %q is not in the sweep: its runs are the seeds %s, whose run ids are the seeds in decimal (5, not 05)", q.RunID, m.Spec.Seeds)
		}
		q.Seed = seed
		fallthrough
	default:
		if q.Seed < m.Spec.Seeds.Start || q.Seed >= m.Spec.Seeds.End {
			return q, notIn("seed %d is not in the sweep: its seeds are %s (START:END, END exclusive)", q.Seed, m.Spec.Seeds)
		}
	}
	steps := m.Spec.ForkAt
	switch {
	case q.ForkStep == 0 && len(steps) == 1:
		q.ForkStep = steps[0]
	case q.ForkStep == 0:
		return q, notIn("the sweep forks at steps %s: give one (--fork-step)", list(steps))
	case !slices.Contains(steps, q.ForkStep):
		return q, notIn("fork step %d is not in the sweep: it forks at %s", q.ForkStep, stepsText(steps))
	}
	treated := s.Treatments()
	switch {
	case q.Arm == "" && len(treated) == 1:
		q.Arm = treated[0]
	case q.Arm == "":
		return q, notIn("the sweep has treatment arms %s: give one (--arm)", list(treated))
	case q.Arm == fork.Off:
		return q, notIn("arm off is the control, shown beside every treatment arm: give a treatment arm of the sweep (%s)", list(treated))
	case !slices.Contains(treated, q.Arm):
		return q, notIn("arm %s is not in the sweep: its treatment arms are %s", q.Arm, list(treated))
	}
	if k := m.Spec.Replicas; q.Replica < 0 || q.Replica >= k {
		return q, notIn("replica %d is not in the sweep: it has %s per arm, 0 to %d", q.Replica, plural.Count(k, "replica"), k-1)
	}
	return q, nil
}

// stepsText names fork steps: "step 3", "steps 2, 3".
func stepsText(steps []int) string {
	if len(steps) == 1 {
		return fmt.Sprintf("step %d", steps[0])
	}
	return "steps " + list(steps)
}

func list[T any](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}

// View is one pair, ready to print.
type View struct {
	Query
	// Recorded: the run is a recorded run (forklab sweep --runs), named
	// by RunID; NoSeed: it has no seed (Seed is then 0).
	Recorded, NoSeed bool
	// World and WorldVersion name the sweep's world; Decl is its
	// declaration.
	Decl       world.Declaration
	Checkpoint Checkpoint
	Pair       Pair
	// Control is replica Replica of off, Treated the same replica of Arm.
	Control, Treated Branch
	// Part is the position (0: the first step after the fork) of the first
	// step where the two branches differ, or where one has ended and the
	// other goes on; -1 when they never part.
	Part int
	// Replayed says the steps were played again from the checkpoint: the
	// sweep kept no transcript of this branch.
	Replayed bool
	// Note says why the steps are missing, when they are.
	Note string
}

// Checkpoint is the checkpoints row of the pair.
type Checkpoint struct {
	Status, Error string
	Over          bool
	// Features and Hidden are the declared values, in declaration order.
	Features, Hidden []world.Value
	Cost             world.Cost
	// JSON is the checkpoint itself.
	JSON []byte
	// History is the turns before the fork, when the checkpoint records
	// them (a built-in world's does).
	History []fork.Turn
}

// Pair is the pairs row: the arm against off, each side by majority.
type Pair struct {
	Status, Error                    string
	Replicas                         int
	ControlWins, TreatmentWins       int
	ControlSuccess, TreatmentSuccess bool
	Label, Quadrant                  string
}

// Branch is one branches row and its steps.
type Branch struct {
	Arm                 fork.Arm
	Replica             int
	Status, Error       string
	Intervened, Success bool
	Cost                world.Cost
	Details             json.RawMessage
	Steps               []Step
}

// Step is one step of a transcript (lab's transcript shape,
// docs/agent-protocol.md).
type Step struct {
	Step         *int64          `json:"step,omitempty"`
	Action       string          `json:"action"`
	Intervention bool            `json:"intervention,omitempty"`
	ToolCall     *ToolCall       `json:"tool_call,omitempty"`
	ToolResult   json.RawMessage `json:"tool_result,omitempty"`
	Observation  json.RawMessage `json:"observation,omitempty"`
	Cost         json.RawMessage `json:"cost,omitempty"`
}

// ToolCall is a step's tool call.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// same says whether two steps did the same thing.
func (a Step) same(b Step) bool {
	eq := func(x, y json.RawMessage) bool { return string(x) == string(y) }
	tc := func(t *ToolCall) string {
		if t == nil {
			return ""
		}
		return t.Name + "\x00" + string(t.Arguments)
	}
	return a.Action == b.Action && a.Intervention == b.Intervention && tc(a.ToolCall) == tc(b.ToolCall) &&
		eq(a.ToolResult, b.ToolResult) && eq(a.Observation, b.Observation)
}

// Pair reads the pair q names (Resolve's checks first) and its steps.
func (s *Sweep) Pair(q Query) (*View, error) {
	q, err := s.Resolve(q)
	if err != nil {
		return nil, err
	}
	m := &s.Manifest
	v := &View{Query: q, Decl: m.Declaration}
	ai := slices.Index(s.arms, q.Arm)
	K := int64(m.Spec.Replicas)
	who := run{seed: q.Seed}
	var (
		file func(table string) string
		i    int64 // the run's position among its unit's rows at the fork step
	)
	if m.Spec.Runs != nil {
		rel, n, err := s.locate(q)
		if err != nil {
			return nil, err
		}
		i, who = n, run{id: q.RunID}
		file = func(table string) string { return table + strings.TrimPrefix(rel, "checkpoints") }
	} else {
		size := m.Spec.ShardSeeds()
		unit := (q.Seed - m.Spec.Seeds.Start) / size
		i = int64(q.Seed - m.Spec.Seeds.Start - unit*size)
		file = func(table string) string {
			return path.Join(table, fmt.Sprintf("config_id=%d", q.Config), fmt.Sprintf("fork_step=%d", q.ForkStep), fmt.Sprintf("part-%06d.parquet", unit))
		}
	}
	cp, err := s.row(file("checkpoints"), i, who, "", -1)
	if err != nil {
		return nil, err
	}
	if who.id != "" {
		v.Recorded = true
		if sd := cp["seed"]; sd.IsNull() {
			v.NoSeed = true
		} else {
			v.Seed = uint64(sd.Int64())
		}
	}
	v.Checkpoint = checkpointOf(cp, &m.Declaration)
	pr, err := s.row(file("pairs"), i*int64(len(s.arms)-1)+int64(ai-1), who, q.Arm, -1)
	if err != nil {
		return nil, err
	}
	v.Pair = pairOf(pr)
	per := int64(len(s.arms)) * K
	for side, arm := range []fork.Arm{fork.Off, q.Arm} {
		a := int64(slices.Index(s.arms, arm))
		r, err := s.row(file("branches"), i*per+a*K+int64(q.Replica), who, arm, q.Replica)
		if err != nil {
			return nil, err
		}
		b, err := branchOf(r, arm, q.Replica)
		if err != nil {
			return nil, fmt.Errorf("%s: %s arm %s replica %d: %w", file("branches"), who, arm, q.Replica, err)
		}
		if side == 0 {
			v.Control = b
		} else {
			v.Treated = b
		}
	}
	if err := s.steps(v); err != nil {
		return nil, err
	}
	v.Part = part(v.Control.Steps, v.Treated.Steps)
	return v, nil
}

// part is the position of the first step where a and b differ, -1 when
// they never do.
func part(a, b []Step) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || !a[i].same(b[i]) {
			return i
		}
	}
	return -1
}

// steps fills the steps of the branches whose transcripts the sweep did
// not keep, by playing them again from the checkpoint, or says in v.Note
// why they stay empty.
func (s *Sweep) steps(v *View) error {
	if v.Checkpoint.Status != schemas.StatusOK {
		v.Note = "the checkpoint is an error row: no branch was played from it"
		return nil
	}
	var need []*Branch
	for _, b := range []*Branch{&v.Control, &v.Treated} {
		if b.Steps == nil && b.Status == schemas.StatusOK {
			need = append(need, b)
		}
	}
	if len(need) == 0 {
		return nil
	}
	m := &s.Manifest
	if m.Spec.Agent != nil {
		v.Note = "the agent sent no transcript of " + sides(need) + "; forklab cannot play an external agent's branch again by itself (forklab fork --checkpoint FILE --agent CMD does, with the agent)"
		return nil
	}
	inst, err := s.instance(v.Config)
	if err != nil {
		v.Note = err.Error()
		return nil
	}
	rp, ok := inst.(lab.Replayer)
	if !ok {
		v.Note = fmt.Sprintf("the sweep kept no transcript, and world %s cannot play a branch again", m.Spec.World)
		return nil
	}
	var rule func([]world.Value) bool
	if m.Spec.Policy != nil {
		if rule, err = m.Spec.Policy.Compile(m.Declaration); err != nil {
			return fmt.Errorf("the sweep's policy: %w", err)
		}
	}
	for _, b := range need {
		r := rule
		if b.Arm != fork.Policy {
			r = nil
		}
		out, err := rp.Replay(v.Checkpoint.JSON, b.Arm, b.Replica, r)
		if err != nil {
			return fmt.Errorf("replay %s arm %s replica %d from its checkpoint: %w", v.run(), b.Arm, b.Replica, err)
		}
		if out.Success != b.Success || out.Cost != b.Cost || out.Intervened != b.Intervened {
			return fmt.Errorf("replaying %s arm %s replica %d from its checkpoint gave success %t, cost %+v, intervened %t where the sweep recorded %t, %+v, %t: this forklab's world %s %s plays differently from the one that ran the sweep; sweep again (with --transcripts to keep the steps)",
				v.run(), b.Arm, b.Replica, out.Success, out.Cost, out.Intervened, b.Success, b.Cost, b.Intervened, m.Declaration.Name, m.Declaration.Version)
		}
		if b.Steps, err = parseSteps(out.Transcript); err != nil {
			return err
		}
	}
	v.Replayed = true
	return nil
}

// sides names branches: "the off branch", "the off and on branches".
func sides(bs []*Branch) string {
	if len(bs) == 1 {
		return "the " + string(bs[0].Arm) + " branch"
	}
	return "the " + string(bs[0].Arm) + " and " + string(bs[1].Arm) + " branches"
}

// instance is the built-in world of configuration c, opened once.
func (s *Sweep) instance(c int) (lab.Instance, error) {
	if inst, ok := s.instances[c]; ok {
		return inst, nil
	}
	m := &s.Manifest
	def, err := lab.Lookup(m.Spec.World)
	if err != nil {
		return nil, fmt.Errorf("the sweep kept no transcript, and this forklab has no world %s to play the branch again", m.Spec.World)
	}
	if v := def.Declaration().Version; v != m.Declaration.Version {
		return nil, fmt.Errorf("the sweep kept no transcript, and this forklab's world %s is version %s, not the sweep's %s: it cannot play the branch again", m.Spec.World, v, m.Declaration.Version)
	}
	cfg := m.Configs[c]
	params, err := def.Declaration().Resolve(cfg.Params) // canonical types, as JSON read them back
	if err != nil {
		return nil, fmt.Errorf("the parameters of configuration %d: %w", c, err)
	}
	inst, err := def.Open(params, cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("open world %s with configuration %d: %w", m.Spec.World, c, err)
	}
	s.instances[c] = inst
	return inst, nil
}

// parseSteps decodes a transcript.
func parseSteps(b []byte) ([]Step, error) {
	steps := []Step{}
	if err := json.Unmarshal(b, &steps); err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	return steps, nil
}

// tableFile is one table file, open, with its columns by name.
type tableFile struct {
	f     *os.File
	pf    *parquet.File
	names []string // by column index
}

// run names the run whose rows row reads: a recorded run by its run id,
// else a seed.
type run struct {
	seed uint64
	id   string
}

func (r run) String() string {
	if r.id != "" {
		return fmt.Sprintf("run %q", r.id)
	}
	return fmt.Sprintf("seed %d", r.seed)
}

// run names v's run: "seed 5", `run "prod/s17"`.
func (v *View) run() string {
	if v.Recorded {
		return run{id: v.RunID}.String()
	}
	return run{seed: v.Seed}.String()
}

// row reads row n of the table file rel (relative to the results
// directory) by column name, and checks that it is who's (and arm's and
// replica's where they are given: "" and -1 skip them): a file that holds
// another row there does not match its manifest.
func (s *Sweep) row(rel string, n int64, who run, arm fork.Arm, replica int) (map[string]parquet.Value, error) {
	t, err := s.file(rel)
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s %w: %s %s; rerun the sweep (or restore the files)", s.Dir, sweep.ErrMismatch, rel, fmt.Sprintf(format, args...))
	}
	base := int64(0)
	for _, rg := range t.pf.RowGroups() {
		if n >= base+rg.NumRows() {
			base += rg.NumRows()
			continue
		}
		rows := rg.Rows()
		defer rows.Close()
		if err := rows.SeekToRow(n - base); err != nil {
			return nil, bad("cannot be read at row %d: %v", n, err)
		}
		buf := make([]parquet.Row, 1)
		if k, err := rows.ReadRows(buf); k != 1 {
			return nil, bad("cannot be read at row %d: %v", n, err)
		}
		out := map[string]parquet.Value{}
		for _, v := range buf[0] {
			if c := v.Column(); c >= 0 && c < len(t.names) {
				out[t.names[c]] = v
			}
		}
		got := out["seed"]
		switch {
		case who.id != "" && str(out["run_id"]) != who.id:
			return nil, bad("holds run %q at row %d where %s belongs", str(out["run_id"]), n, who)
		case who.id == "" && (got.IsNull() || uint64(got.Int64()) != who.seed):
			return nil, bad("holds seed %v at row %d where %s belongs", got, n, who)
		case arm != "" && str(out["arm"]) != string(arm):
			return nil, bad("holds arm %s at row %d where %s's arm %s belongs", str(out["arm"]), n, who, arm)
		case replica >= 0 && int(out["replica"].Int32()) != replica:
			return nil, bad("holds replica %d at row %d where %s's replica %d belongs", out["replica"].Int32(), n, who, replica)
		}
		return out, nil
	}
	return nil, bad("has %d rows; %s belongs at row %d", base, who, n)
}

// locate finds recorded run q.RunID's checkpoint at q.ForkStep: the
// checkpoints file of its unit and its row there, which is also its
// position among the unit's runs in the branches and pairs files of that
// fork step (a run has rows at a fork step in all three or in none). It
// reads the run_id column of the fork step's checkpoints files, unit by
// unit: a recorded population's runs are not numbered by their ids. A run
// the sweep lacks, or that has no checkpoint at the step, is ErrNotInSweep.
func (s *Sweep) locate(q Query) (string, int64, error) {
	m := &s.Manifest
	dir := path.Join("checkpoints", fmt.Sprintf("config_id=%d", q.Config), fmt.Sprintf("fork_step=%d", q.ForkStep)) + "/"
	for _, f := range m.Files {
		if !strings.HasPrefix(f.Path, dir) {
			continue
		}
		n, err := s.find(f.Path, q.RunID)
		if err != nil || n >= 0 {
			return f.Path, n, err
		}
	}
	tasks := path.Join("tasks", fmt.Sprintf("config_id=%d", q.Config)) + "/"
	for _, f := range m.Files {
		if !strings.HasPrefix(f.Path, tasks) {
			continue
		}
		if n, err := s.find(f.Path, q.RunID); err != nil {
			return "", 0, err
		} else if n >= 0 {
			return "", 0, notIn("run %q has no checkpoint at fork step %d: its source recorded none there (the sweep forks at %s)", q.RunID, q.ForkStep, stepsText(m.Spec.ForkAt))
		}
	}
	return "", 0, notIn("run id %q is not in the sweep: its runs are the %d recorded runs of %s (forklab sql DIR \"SELECT run_id FROM tasks\" lists them)", q.RunID, m.Spec.Runs.Count, m.Spec.Runs.Source)
}

// find returns the row of the table file rel whose run_id is id, or -1.
func (s *Sweep) find(rel, id string) (int64, error) {
	t, err := s.file(rel)
	if err != nil {
		return 0, err
	}
	ci := slices.Index(t.names, "run_id")
	if ci < 0 {
		return -1, nil
	}
	base := int64(0)
	var vals []parquet.Value
	for _, rg := range t.pf.RowGroups() {
		pages := rg.ColumnChunks()[ci].Pages()
		n := base
		for {
			p, err := pages.ReadPage()
			if err == io.EOF {
				break
			}
			if err != nil {
				pages.Close()
				return 0, fmt.Errorf("%s %w: %s cannot be read: %v", s.Dir, sweep.ErrMismatch, rel, err)
			}
			vals = slices.Grow(vals[:0], int(p.NumValues()))[:p.NumValues()]
			k, err := p.Values().ReadValues(vals)
			if err != nil && err != io.EOF {
				parquet.Release(p)
				pages.Close()
				return 0, fmt.Errorf("%s %w: %s cannot be read: %v", s.Dir, sweep.ErrMismatch, rel, err)
			}
			for j := range k {
				if v := vals[j]; !v.IsNull() && string(v.ByteArray()) == id {
					parquet.Release(p)
					pages.Close()
					return n + int64(j), nil
				}
			}
			n += int64(k)
			parquet.Release(p)
		}
		pages.Close()
		base += rg.NumRows()
	}
	return -1, nil
}

// file opens the table file rel once; it must be one the manifest lists.
func (s *Sweep) file(rel string) (*tableFile, error) {
	if t, ok := s.files[rel]; ok {
		return t, nil
	}
	listed := slices.ContainsFunc(s.Manifest.Files, func(f sweep.FileInfo) bool { return f.Path == rel })
	if !listed {
		return nil, fmt.Errorf("%s %w: it lists no %s, where the seed's rows belong; rerun the sweep", s.Dir, sweep.ErrMismatch, rel)
	}
	f, err := os.Open(filepath.Join(s.Dir, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	pf, err := parquet.OpenFile(f, fi.Size(), parquet.SkipBloomFilters(true))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s %w: %s is not readable Parquet: %v", s.Dir, sweep.ErrMismatch, rel, err)
	}
	t := &tableFile{f: f, pf: pf}
	for _, p := range pf.Schema().Columns() {
		t.names = append(t.names, strings.Join(p, "."))
	}
	s.files[rel] = t
	return t, nil
}

// str is a VARCHAR value's text ("" for null).
func str(v parquet.Value) string {
	if v.IsNull() || v.Kind() != parquet.ByteArray {
		return ""
	}
	return string(v.ByteArray())
}

func boolOf(v parquet.Value) bool { return !v.IsNull() && v.Boolean() }

func intOf(v parquet.Value) int64 {
	switch {
	case v.IsNull():
		return 0
	case v.Kind() == parquet.Int32:
		return int64(v.Int32())
	}
	return v.Int64()
}

func floatOf(v parquet.Value) float64 {
	if v.IsNull() {
		return 0
	}
	return v.Double()
}

// costOf reads the cost columns with prefix (cost_).
func costOf(r map[string]parquet.Value, prefix string) world.Cost {
	return world.Cost{Steps: intOf(r[prefix+world.CostSteps]), Tokens: intOf(r[prefix+world.CostTokens]),
		USD: floatOf(r[prefix+world.CostUSD]), Seconds: floatOf(r[prefix+world.CostSeconds])}
}

// valuesOf reads declared fields named with prefix; a column the file
// leaves out is null.
func valuesOf(r map[string]parquet.Value, prefix string, fs []world.Field) []world.Value {
	out := make([]world.Value, len(fs))
	for i, f := range fs {
		v, ok := r[prefix+f.Name]
		switch {
		case !ok || v.IsNull():
			out[i] = world.NullValue()
		case f.Kind == world.Bool:
			out[i] = world.BoolValue(v.Boolean())
		case f.Kind == world.Int:
			out[i] = world.IntValue(intOf(v))
		case f.Kind == world.Float:
			out[i] = world.FloatValue(v.Double())
		default:
			out[i] = world.EnumValue(str(v))
		}
	}
	return out
}

func checkpointOf(r map[string]parquet.Value, d *world.Declaration) Checkpoint {
	c := Checkpoint{Status: str(r["status"]), Error: str(r["error"]), Over: boolOf(r["over"]),
		Features: valuesOf(r, "", d.Features), Hidden: valuesOf(r, schemas.HiddenPrefix, d.Hidden),
		Cost: costOf(r, "cost_"), JSON: []byte(str(r["checkpoint"]))}
	var h struct {
		History []fork.Turn `json:"history"`
	}
	if json.Unmarshal(c.JSON, &h) == nil {
		c.History = h.History
	}
	return c
}

func pairOf(r map[string]parquet.Value) Pair {
	return Pair{Status: str(r["status"]), Error: str(r["error"]), Replicas: int(intOf(r["replicas"])),
		ControlWins: int(intOf(r["control_wins"])), TreatmentWins: int(intOf(r["treatment_wins"])),
		ControlSuccess: boolOf(r["control_success"]), TreatmentSuccess: boolOf(r["treatment_success"]),
		Label: str(r["label"]), Quadrant: str(r["quadrant"])}
}

func branchOf(r map[string]parquet.Value, arm fork.Arm, replica int) (Branch, error) {
	b := Branch{Arm: arm, Replica: replica, Status: str(r["status"]), Error: str(r["error"]),
		Intervened: boolOf(r["intervened"]), Success: boolOf(r["success"]), Cost: costOf(r, "cost_")}
	if d := str(r["details"]); d != "" {
		b.Details = json.RawMessage(d)
	}
	if t := str(r[schemas.TranscriptColumn]); t != "" {
		steps, err := parseSteps([]byte(t))
		if err != nil {
			return b, err
		}
		b.Steps = steps
	}
	return b, nil
}
