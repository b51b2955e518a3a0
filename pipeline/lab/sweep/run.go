package sweep

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/forklab/forklab/internal/atomicfile"
	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/schemas"
)

// Options control how a sweep runs, not what it computes: the same Spec
// gives the same rows under any Options.
type Options struct {
	// Workers is the number of units processed at once; 0 means one per
	// CPU.
	Workers int
	// Progress, if not nil, is called from worker goroutines with the
	// number of seeds just finished and the errors among them; it must be
	// safe for concurrent use.
	Progress func(seeds, errors int)
	// Version is the forklab version recorded in the manifest.
	Version string
	// Runners, if set, replaces the world's own runners: forklab sweep
	// --from-log plays the sessions on the session log. The tables must
	// come out identical to the in-memory sweep's.
	Runners func(c Config, plan lab.Plan) (lab.Runner, error)
	// Units, if set, limits the sweep to the units it accepts (a share of
	// a static split); Run then writes no manifest and publishes nothing.
	Units func(Unit) bool
	// Buffered writes every unit buffered (as agents' sweeps are), for
	// tests that hold both ways of writing to the same bytes.
	Buffered bool
	// SweepID, if set, is the manifest's sweep_id (a distributed sweep's
	// id, which its records on Kafka carry); otherwise the one recorded in
	// the staging directory's ledger by the run that began the sweep (a
	// resumed sweep keeps its id), or a new random one. Runners are told
	// it (lab.Plan.SweepID): an agent names its branches after it.
	SweepID string
	// KeptCost, if set, is called once, before any unit runs, with the
	// recorded cost of the units an interrupted sweep finished without
	// error rows (the cost so far, for --max-cost: a budget counts it
	// before it hands out new work). A unit among them found damaged is
	// written again, and its cost counted twice.
	KeptCost func(world.Cost)
	// FinalizeOnly runs no unit: every unit must already be in the
	// staging directory's ledger with its files intact (the shares of a
	// static split, or a distributed sweep's workers, wrote them); Run then
	// writes the configuration tables and the manifest and publishes. A
	// missing or damaged unit is an error naming it and its seeds.
	FinalizeOnly bool
}

// Unit is one block of a sweep's work: a shard of seeds of one
// configuration, every fork step of it. Its files are byte-identical
// whoever writes them, so a unit redone is harmless.
type Unit struct {
	Config int   `json:"config_id"`
	Index  int   `json:"index"`
	Seeds  Range `json:"seeds"`
}

// ID names the unit in the ledger: c<config>-s<index>.
func (u Unit) ID() string { return fmt.Sprintf("c%d-s%06d", u.Config, u.Index) }

// rowsPerShard bounds the branch rows a shard produces, which bounds the
// rows in a table file.
const rowsPerShard = 1 << 18

// ShardSeeds returns the number of seeds per shard for a spec: UnitSeeds
// when it is set; otherwise the seed range is cut into as many shards as
// shards of base seeds would make (base: as many seeds as keep a shard's
// branch rows near rowsPerShard, a multiple of 64, at least 1024), of equal
// size rounded up to a multiple of 64. Equal shards keep every worker busy
// to the end: 1,000,000 seeds in shards of 131,072 left the last one at
// 63% of the others, and one of two workers idle while the other finished
// its fourth. It
// depends only on the spec.
func (s Spec) ShardSeeds() uint64 {
	if s.UnitSeeds > 0 {
		return uint64(s.UnitSeeds)
	}
	perSeed := uint64(len(s.ForkAt) * len(s.Arms) * s.Replicas)
	base := max(uint64(1024), rowsPerShard/perSeed)
	base -= base % 64
	n := s.Population().Len()
	if n <= base {
		return base
	}
	shards := (n-1)/base + 1
	size := (n-1)/shards + 1 // at most base
	return (size + 63) &^ 63 // at most base, a multiple of 64
}

// Units calls f for every unit of the resolved spec, in order, without
// holding them all in memory; it stops when f returns false.
func (r Resolved) Units(f func(Unit) bool) {
	size := r.Spec.ShardSeeds()
	pop := r.Spec.Population()
	for _, c := range r.Configs {
		i := 0
		for lo := pop.Start; lo < pop.End; lo += size {
			if !f(Unit{Config: c.ID, Index: i, Seeds: Range{lo, min(lo+size, pop.End)}}) {
				return
			}
			i++
			if lo > pop.End-size { // lo+size would pass End (or overflow)
				break
			}
		}
	}
}

// UnitCount is the number of units of the resolved spec.
func (r Resolved) UnitCount() uint64 {
	size := r.Spec.ShardSeeds()
	n := (r.Spec.Population().Len() + size - 1) / size
	return n * uint64(len(r.Configs))
}

// JournalDir is where a costly runner (an external agent) keeps the seeds
// it finished, inside the unit ledger: it lives and goes with the ledger.
func (s *Staging) JournalDir() string { return filepath.Join(s.Dir, ledgerDir, "journal") }

// ledgerEntry records a finished unit: its files (paths relative to the
// staging directory) with their sizes, rows and checksums.
type ledgerEntry struct {
	Unit  Unit       `json:"unit"`
	Files []FileInfo `json:"files"`
	// Errors counts the unit's error pairs.
	Errors int64 `json:"errors"`
	// Cost is what the unit's runs cost, as the world reports it.
	Cost world.Cost `json:"cost"`
	// Labels counts the unit's pairs by label.
	Labels []LabelCount `json:"labels,omitempty"`
}

// LabelCount counts the pairs of one configuration, fork step and
// treatment arm by label; error pairs have no label and count apart.
type LabelCount struct {
	Config    int      `json:"config_id"`
	ForkStep  int      `json:"fork_step"`
	Arm       fork.Arm `json:"arm"`
	Rescued   int64    `json:"rescued"`
	Harmed    int64    `json:"harmed"`
	Unchanged int64    `json:"unchanged"`
	Errors    int64    `json:"errors"`
}

// Net is rescued minus harmed.
func (c LabelCount) Net() int64 { return c.Rescued - c.Harmed }

// Result is what Run did: the manifest it published (zero for a partial
// run), and how many units it took from an earlier, interrupted run.
type Result struct {
	Manifest Manifest
	Resumed  int
	Errors   int64
	Cost     world.Cost
	// Labels counts the pairs by label, per configuration, fork step and
	// treatment arm, in that order.
	Labels []LabelCount
}

// Run runs the resolved sweep in st and, once every unit is in, publishes
// it to st.Out with its manifest. Units an interrupted run finished (their
// ledger entries in st, with files of the recorded sizes and checksums)
// are kept; every other unit is (re)written. On error or cancellation it
// returns without publishing; the units finished so far stay in st for
// --resume.
func Run(ctx context.Context, r Resolved, st *Staging, opt Options) (Result, error) {
	spec := r.Spec
	m := Manifest{ForklabVersion: opt.Version, SchemaVersion: schemas.SchemaVersion, SweepID: opt.SweepID,
		Spec: spec.redacted(), Declaration: r.Decl, Configs: r.Configs, Rows: map[string]int64{}, StartedAt: time.Now().UTC()}
	var res Result
	layouts, err := layoutsFor(r.Decl, spec.Runs, spec.Transcripts)
	if err != nil {
		return res, err
	}
	if err := checkLedgerSpec(st.Dir, spec.Identity(), r.Decl); err != nil {
		return res, err
	}
	if opt.SweepID, err = ledgerSweepID(st.Dir, opt.SweepID); err != nil {
		return res, err
	}
	m.SweepID = opt.SweepID
	done, err := readLedger(st.Dir)
	if err != nil {
		return res, err
	}
	syncs := newSyncer()
	var small []FileInfo
	if opt.Units == nil {
		if small, err = writeConfigTables(st.Dir, r, syncs); err != nil {
			syncs.wait()
			return res, err
		}
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = int(min(uint64(workers), max(r.UnitCount(), 1)))

	if opt.KeptCost != nil && !opt.FinalizeOnly {
		var kept world.Cost
		r.Units(func(u Unit) bool {
			if opt.Units != nil && !opt.Units(u) {
				return true
			}
			if e, ok := done[u.ID()]; ok && e.Unit == u && e.Errors == 0 {
				kept = kept.Add(e.Cost)
			}
			return true
		})
		opt.KeptCost(kept)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan Unit)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		entries  []ledgerEntry
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	unitDone := func(e ledgerEntry, err error) {
		if err != nil {
			fail(err)
			return
		}
		mu.Lock()
		entries = append(entries, e)
		mu.Unlock()
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newUnitWriter(r, layouts, st.Dir, opt, syncs, unitDone)
			defer w.close()
			for u := range work {
				if _, err := w.run(ctx, u); err != nil {
					fail(err)
				}
			}
		}()
	}
	r.Units(func(u Unit) bool {
		if opt.Units != nil && !opt.Units(u) {
			return true
		}
		e, ok := done[u.ID()]
		var bad error
		if !ok || e.Unit != u {
			bad = &UnitError{Unit: u, Err: errMissing}
		} else if err := verifyFiles(st.Dir, e.Files); err != nil {
			bad = &UnitError{Unit: u, Err: fmt.Errorf("is damaged: %w", err)}
		}
		if bad != nil && opt.FinalizeOnly {
			fail(fmt.Errorf("%w: run its share again", bad))
			return false
		}
		// A unit with error rows is played again: a resumed sweep retries
		// what failed (an agent's finished seeds come from its journal).
		if bad == nil && (e.Errors == 0 || opt.FinalizeOnly) {
			mu.Lock()
			entries = append(entries, e)
			res.Resumed++
			mu.Unlock()
			if opt.Progress != nil {
				opt.Progress(int(u.Seeds.Len()), int(e.Errors))
			}
			return true
		}
		select {
		case work <- u:
			return true
		case <-ctx.Done():
			return false
		}
	})
	close(work)
	wg.Wait()
	if err := syncs.wait(); firstErr == nil {
		firstErr = err
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return res, firstErr
	}
	labels := map[[3]any]*LabelCount{}
	for _, e := range entries {
		res.Errors += e.Errors
		res.Cost = res.Cost.Add(e.Cost)
		for _, l := range e.Labels {
			k := [3]any{l.Config, l.ForkStep, l.Arm}
			if c, ok := labels[k]; ok {
				c.Rescued, c.Harmed, c.Unchanged, c.Errors = c.Rescued+l.Rescued, c.Harmed+l.Harmed, c.Unchanged+l.Unchanged, c.Errors+l.Errors
			} else {
				l := l
				labels[k] = &l
			}
		}
	}
	for _, c := range labels {
		res.Labels = append(res.Labels, *c)
	}
	sort.Slice(res.Labels, func(i, j int) bool {
		a, b := res.Labels[i], res.Labels[j]
		if a.Config != b.Config {
			return a.Config < b.Config
		}
		if a.ForkStep != b.ForkStep {
			return a.ForkStep < b.ForkStep
		}
		return slices.Index(r.Spec.Arms, a.Arm) < slices.Index(r.Spec.Arms, b.Arm)
	})
	if opt.Units != nil {
		return res, nil
	}
	// Every unit is in: the manifest lists every file.
	files := append([]FileInfo{}, small...)
	for _, e := range entries {
		files = append(files, e.Files...)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	for _, f := range files {
		m.Rows[strings.Split(f.Path, "/")[0]] += f.Rows
	}
	for _, t := range append([]string{schemas.ConfigsTable, schemas.ParamsTable}, schemas.Tables...) {
		m.Rows[t] += 0
	}
	m.Files = files
	m.Errors, m.Cost = res.Errors, res.Cost
	if n := m.Rows["pairs"]; n > 0 {
		m.ErrorRate = float64(m.Errors) / float64(n)
	}
	m.MaxErrorRate = spec.ErrorRateLimit()
	m.Incomplete = m.ErrorRate > m.MaxErrorRate
	if r.Source != nil {
		// Read as it was listed, or not published.
		if err := r.Source.Check(); err != nil {
			return res, err
		}
	}
	if err := removeTemps(st.Dir); err != nil {
		return res, fmt.Errorf("staging %s: %w", st.Dir, err)
	}
	if err := syncTree(st.Dir); err != nil {
		return res, fmt.Errorf("sync %s: %w", st.Dir, err)
	}
	m.FinishedAt = time.Now().UTC()
	if err := st.Publish(&m); err != nil {
		return res, err
	}
	res.Manifest = m
	return res, nil
}

func newSweepID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// sweepIDName is the file in the ledger folder holding the sweep's id.
const sweepIDName = "sweep_id"

// ledgerSweepID returns the sweep's id: given, when the caller has one (a
// distributed sweep's); else the one recorded in the ledger of staging
// dir, so that a resumed sweep, every share of a static split and its
// finalize have the id the sweep began with — the id its agent was told
// in every branch (branch_id) and its manifest records; else a new one,
// recorded there (the first of several shares to record it wins).
func ledgerSweepID(dir, given string) (string, error) {
	if given != "" {
		return given, nil
	}
	path := filepath.Join(dir, ledgerDir, sweepIDName)
	for range 3 {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return string(bytes.TrimSpace(b)), nil
		}
		if err := os.MkdirAll(filepath.Join(dir, ledgerDir), 0o755); err != nil {
			return "", err
		}
		tmp := path + ".new" + tmpInfix + newSweepID()[:8]
		if err := os.WriteFile(tmp, []byte(newSweepID()), 0o644); err != nil {
			return "", fmt.Errorf("staging %s: record the sweep id: %w", dir, err)
		}
		// A hard link makes the id appear whole or not at all, and fails if
		// another share recorded one first: then that one is read.
		err := os.Link(tmp, path)
		os.Remove(tmp)
		if err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("staging %s: record the sweep id: %w", dir, err)
		}
	}
	return "", fmt.Errorf("staging %s: the sweep id in %s cannot be read", dir, path)
}

// specName is the file in the ledger folder holding the spec its units
// belong to: --resume refuses a ledger of another spec.
const specName = "spec.json"

// ErrSpecChanged reports units staged for another spec (or another world
// declaration) than the sweep asked now: --resume, a share or a worker
// never reuses them. errors.Is(err, ErrSpecChanged) holds for a
// *SpecChangedError.
var ErrSpecChanged = errors.New("of another spec")

// SpecChangedError is ErrSpecChanged with what differs: Dir is the staging
// directory holding the units, Diff names the keys that differ with both
// values ("seeds: 0:300 then, 0:400 now"), or says that the world's
// declaration changed.
type SpecChangedError struct {
	Dir  string
	Diff string
}

func (e *SpecChangedError) Error() string {
	return fmt.Sprintf("the interrupted sweep in %s was of another spec (%s)", e.Dir, e.Diff)
}

// Is makes errors.Is(err, ErrSpecChanged) hold.
func (e *SpecChangedError) Is(target error) bool { return target == ErrSpecChanged }

// specDiff words what differs between two ledger spec records (the JSON
// checkLedgerSpec writes): up to three differing spec keys with their old
// and new values, or the declaration.
func specDiff(old, cur []byte) string {
	type rec struct {
		Spec        map[string]json.RawMessage `json:"spec"`
		Declaration json.RawMessage            `json:"declaration"`
	}
	var a, b rec
	if json.Unmarshal(old, &a) != nil || json.Unmarshal(cur, &b) != nil {
		return "its recorded spec cannot be read"
	}
	var diffs []string
	diffMaps(a.Spec, b.Spec, "", &diffs)
	if len(diffs) > 3 {
		diffs = append(diffs[:3], fmt.Sprintf("and %d more keys", len(diffs)-3))
	}
	if len(diffs) == 0 {
		var x, y bytes.Buffer
		json.Compact(&x, a.Declaration)
		json.Compact(&y, b.Declaration)
		if x.String() != y.String() {
			return "the world declares itself otherwise now (for an agent, its initialize reply): " + declDiff(a.Declaration, b.Declaration)
		}
		return "its recorded spec differs"
	}
	return strings.Join(diffs, "; ")
}

// declDiff words what differs between two world declarations as specDiff
// words spec keys, each key with its old and new values: "version: "1"
// then, "2" now", "features.x: unset then, {…} now" (a list of named
// entries — params, task, features, hidden, and interventions by arm — is
// compared entry by entry), up to three differences.
func declDiff(old, cur json.RawMessage) string {
	var a, b map[string]json.RawMessage
	if json.Unmarshal(old, &a) != nil || json.Unmarshal(cur, &b) != nil {
		return "its recorded declaration cannot be read"
	}
	byName := func(m map[string]json.RawMessage) {
		for k, v := range m {
			var list []map[string]json.RawMessage
			if json.Unmarshal(v, &list) != nil || len(list) == 0 {
				continue
			}
			named := map[string]json.RawMessage{}
			for _, e := range list {
				var name string
				key := e["name"]
				if key == nil {
					key = e["arm"] // an intervention is named by its arm
				}
				if json.Unmarshal(key, &name) != nil || name == "" {
					named = nil
					break
				}
				named[name], _ = json.Marshal(e)
			}
			if named != nil && len(named) == len(list) {
				m[k], _ = json.Marshal(named)
			}
		}
	}
	byName(a)
	byName(b)
	var diffs []string
	diffMaps(a, b, "", &diffs)
	if len(diffs) > 3 {
		diffs = append(diffs[:3], fmt.Sprintf("and %d more", len(diffs)-3))
	}
	if len(diffs) == 0 {
		return "its recorded declaration differs"
	}
	return strings.Join(diffs, "; ")
}

// diffMaps appends to diffs, in key order, each key of a or b whose
// values differ ("seeds: "0:300" then, "0:400" now"), going into mappings
// ("params.p_stall: …").
func diffMaps(a, b map[string]json.RawMessage, prefix string, diffs *[]string) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	compact := func(v json.RawMessage) string {
		if v == nil {
			return "unset"
		}
		var buf bytes.Buffer
		if json.Compact(&buf, v) != nil {
			return string(v)
		}
		return buf.String()
	}
	show := func(s string) string {
		if len(s) > 60 {
			return s[:57] + "..."
		}
		return s
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		x, y := compact(a[k]), compact(b[k])
		if x == y {
			continue
		}
		var ma, mb map[string]json.RawMessage
		if json.Unmarshal(a[k], &ma) == nil && json.Unmarshal(b[k], &mb) == nil && ma != nil && mb != nil {
			diffMaps(ma, mb, prefix+k+".", diffs)
			continue
		}
		*diffs = append(*diffs, fmt.Sprintf("%s%s: %s then, %s now", prefix, k, show(x), show(y)))
	}
}

// checkLedgerSpec records spec (its Identity) and the world's declaration
// in the ledger folder of staging dir, or, when they are recorded, checks
// they are the same: units of another spec, or of a world that declares
// itself otherwise (an agent changed meanwhile), are never reused.
func checkLedgerSpec(dir string, spec Spec, decl world.Declaration) error {
	b, err := json.Marshal(struct {
		Spec        Spec              `json:"spec"`
		Declaration world.Declaration `json:"declaration"`
	}{spec, decl})
	if err != nil {
		return err
	}
	path := filepath.Join(dir, ledgerDir, specName)
	old, err := os.ReadFile(path)
	if err == nil {
		if string(old) != string(b) {
			return &SpecChangedError{Dir: dir, Diff: specDiff(old, b)}
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Join(dir, ledgerDir), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b)
}

// readLedger reads the finished units of staging dir, by unit ID.
func readLedger(dir string) (map[string]ledgerEntry, error) {
	out := map[string]ledgerEntry{}
	entries, err := os.ReadDir(filepath.Join(dir, ledgerDir))
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || e.Name() == specName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, ledgerDir, e.Name()))
		if err != nil {
			return nil, err
		}
		var le ledgerEntry
		if json.Unmarshal(b, &le) != nil {
			continue // torn: the unit is redone
		}
		out[le.Unit.ID()] = le
	}
	return out, nil
}

// verifyFiles checks that every file is present under dir with its
// recorded size and checksum.
func verifyFiles(dir string, files []FileInfo) error {
	for _, f := range files {
		crc, n, err := fileCRC(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return err
		}
		if n != f.Bytes || crc != f.CRC32C {
			return fmt.Errorf("%s: %d bytes, crc32c %s; the ledger says %d bytes, %s", f.Path, n, crc, f.Bytes, f.CRC32C)
		}
	}
	return nil
}

// tmpInfix marks a temporary file: ".NAME.tmp-RANDOM" as tableFile names
// them (atomicfile's ".NAME.forklab.tmp-RANDOM" holds it too).
const tmpInfix = ".tmp-"

// removeTemps removes the temporary files under root that writers killed
// mid-file left behind (a unit's files are only ever renamed into place
// whole), so that none is published.
func removeTemps(root string) error {
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil // a writer's rename got there first
			}
			return err
		}
		if n := d.Name(); !d.IsDir() && strings.HasPrefix(n, ".") && strings.Contains(n, tmpInfix) {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}

// syncTree syncs every directory under root (their entries are renamed
// files).
func syncTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return err
	})
	if err != nil {
		return err
	}
	return syncDirs(dirs)
}

// layouts are the table layouts of one world.
type layouts struct {
	tasks, checkpoints, branches, pairs *layout
}

// layoutOf is the layout of a table of columns cols; expected says which
// omittable columns the files of a sweep without errors hold (nil: none).
func layoutOf(table string, cols []schemas.Column, expected func(string) bool) (*layout, error) {
	specs := make([]colSpec, len(cols))
	for i, c := range cols {
		var t colType
		switch c.Type {
		case schemas.BigInt:
			t = colInt64
		case schemas.Integer:
			t = colInt32
		case schemas.Boolean:
			t = colBool
		case schemas.Double:
			t = colDouble
		default:
			t = colText
			if c.Dict {
				t = colDict
			}
		}
		specs[i] = colSpec{name: c.Name, typ: t, nullable: c.Optional, omittable: c.Omittable, expected: expected != nil && expected(c.Name)}
	}
	return newLayout(table, specs)
}

// newLayouts returns the layouts of world d's tables for a seed
// population; with transcripts a branches file without errors holds the
// transcript column.
func newLayouts(d world.Declaration, transcripts bool) (*layouts, error) {
	return layoutsFor(d, nil, transcripts)
}

// layoutsFor is newLayouts for a sweep of population runs (nil: seeds):
// the files of a recorded population hold run_id, and metadata when its
// records carry some.
func layoutsFor(d world.Declaration, runs *Runs, transcripts bool) (*layouts, error) {
	expected := func(name string) bool {
		if cost, ok := strings.CutPrefix(name, "cost_"); ok {
			return d.Cost.Reports(cost)
		}
		if cost, ok := strings.CutPrefix(name, "extra_"); ok {
			return d.Cost.Reports(cost)
		}
		switch name {
		case "seed":
			return true
		case "run_id":
			return runs != nil
		case "metadata":
			return runs != nil && runs.Metadata
		case schemas.TranscriptColumn:
			return transcripts
		case "score", "score_control", "score_treated", "score_diff":
			// A scored world's score columns are in its files without
			// errors, as a reported cost's are: a streamed file starts
			// with them (otherwise its first score would make it start
			// again buffered).
			return d.Score != nil
		}
		return false
	}
	var ls layouts
	for _, t := range []struct {
		name string
		dst  **layout
	}{{"tasks", &ls.tasks}, {"checkpoints", &ls.checkpoints}, {"branches", &ls.branches}, {"pairs", &ls.pairs}} {
		l, err := layoutOf(t.name, schemas.TableColumns(t.name, d), expected)
		if err != nil {
			return nil, err
		}
		*t.dst = l
	}
	return &ls, nil
}

// writeConfigTables writes the configs and params tables.
func writeConfigTables(dir string, r Resolved, s *syncer) ([]FileInfo, error) {
	var (
		mu    sync.Mutex
		files []FileInfo
	)
	record := func(f FileInfo) {
		rel, _ := filepath.Rel(dir, f.Path)
		f.Path = filepath.ToSlash(rel)
		mu.Lock()
		files = append(files, f)
		mu.Unlock()
	}
	cl, err := layoutOf(schemas.ConfigsTable, schemas.Configs(), nil)
	if err != nil {
		return nil, err
	}
	t := newTableFile(cl, 0)
	if err := t.open(filepath.Join(dir, schemas.ConfigsTable), "configs.parquet", true); err != nil {
		return nil, fmt.Errorf("write configs: %w", err)
	}
	for _, c := range r.Configs {
		pj, err := json.Marshal(c.Params)
		if err != nil {
			t.abort()
			return nil, err
		}
		t.putInt32(0, int32(c.ID))
		t.putString(1, r.Decl.Name)
		t.putString(2, r.Decl.Version)
		t.putString(3, string(pj))
		t.putDouble(4, c.Model.Temperature)
		t.putDouble(5, c.Model.NoTool)
		if _, err := t.end(); err != nil {
			t.abort()
			return nil, fmt.Errorf("write configs: %w", err)
		}
	}
	if err := t.commit(s, record); err != nil {
		t.abort()
		return nil, fmt.Errorf("write configs: %w", err)
	}
	pl, err := layoutOf(schemas.ParamsTable, schemas.Params(), nil)
	if err != nil {
		return nil, err
	}
	pt := newTableFile(pl, 0)
	if err := pt.open(filepath.Join(dir, schemas.ParamsTable), "params.parquet", true); err != nil {
		return nil, fmt.Errorf("write params: %w", err)
	}
	for _, c := range r.Configs {
		for _, p := range r.Decl.Params {
			pt.putInt32(0, int32(c.ID))
			pt.putString(1, p.Name)
			pt.putString(2, string(p.Kind))
			switch v := c.Params[p.Name].(type) {
			case bool:
				pt.putDouble(3, float64(world.BoolValue(v).I))
			case int64:
				pt.putDouble(3, float64(v))
			case float64:
				pt.putDouble(3, v)
			default:
				pt.putNull(3)
			}
			pt.putString(4, c.Params.Text(p.Name))
			if _, err := pt.end(); err != nil {
				pt.abort()
				return nil, fmt.Errorf("write params: %w", err)
			}
		}
	}
	if err := pt.commit(s, record); err != nil {
		pt.abort()
		return nil, fmt.Errorf("write params: %w", err)
	}
	if err := s.wait(); err != nil {
		return nil, err
	}
	return files, nil
}

// forkTables are the files of one fork step of a unit.
type forkTables struct {
	checkpoints, branches, pairs *tableFile
	// arena holds the JSON of the checkpoint rows not yet handed to the
	// Parquet writer, which copies it: it is emptied whenever the
	// checkpoints table flushes.
	arena []byte
	// errs holds error texts of rows not yet flushed, likewise.
	errs []string
	// transcripts holds the transcripts of the branch rows not yet
	// flushed, likewise: emptied whenever the branches table flushes.
	transcripts []byte
}

// checkpointBatch is how many checkpoint rows go to the Parquet writer at
// once: few enough that their JSON (about 500 bytes each) is still in the
// CPU's cache when the writer copies it.
const checkpointBatch = 512

// unitWriter runs units one after another on one goroutine, reusing its
// buffers.
type unitWriter struct {
	r       Resolved
	ls      *layouts
	dir     string
	opt     Options
	sync    *syncer
	plan    lab.Plan
	runners map[int]lab.Runner
	insts   []lab.Instance
	tasks   *tableFile
	forks   []forkTables
	taskErr []string
	// cols of the declared values in each table: the first feature column
	// of checkpoints and pairs, the first task column of tasks.
	cpFeat, pairFeat, taskCol int
	// the run_id column of each table, and the tasks' metadata
	taskRun, taskMeta, cpRun, brRun, prRun int
	// transcriptCol is the branches table's transcript column.
	transcriptCol             int
	kinds                     []colType // features, then hidden
	taskKinds                 []colType
	faultIdx                  int
	score                     *world.ScoreSpec // nil for a pass/fail world
	costReported              [4]bool
	unreported, unreportedErr int
	progressBatch             int

	// per unit
	errors int64
	labels []LabelCount // by fork step, then treatment arm
	cost   world.Cost
	// done receives each unit's ledger entry once its files are in place.
	done func(ledgerEntry, error)
	// seeds written in this pass over the unit; reported to Progress in
	// any pass.
	seeds, reported int
}

func newUnitWriter(r Resolved, ls *layouts, dir string, opt Options, s *syncer, done func(ledgerEntry, error)) *unitWriter {
	plan := r.Plan()
	plan.SweepID = opt.SweepID
	w := &unitWriter{r: r, ls: ls, dir: dir, opt: opt, sync: s, done: done, plan: plan, runners: map[int]lab.Runner{},
		tasks: newTableFile(ls.tasks, 0), forks: make([]forkTables, len(r.Spec.ForkAt)),
		cpFeat: ls.checkpoints.index("over") + 1, pairFeat: ls.pairs.index("score_diff") + 1, taskCol: ls.tasks.index("error") + 1,
		transcriptCol: ls.branches.index(schemas.TranscriptColumn),
		faultIdx:      r.Decl.FaultIndex(), score: r.Decl.Score,
		taskRun: ls.tasks.index("run_id"), taskMeta: ls.tasks.index("metadata"), cpRun: ls.checkpoints.index("run_id"),
		brRun: ls.branches.index("run_id"), prRun: ls.pairs.index("run_id")}
	for i := range w.forks {
		w.forks[i] = forkTables{checkpoints: newTableFile(ls.checkpoints, checkpointBatch),
			branches: newTableFile(ls.branches, 0), pairs: newTableFile(ls.pairs, 0)}
	}
	for _, f := range r.Decl.Features {
		w.kinds = append(w.kinds, colTypeOf(f.Kind))
	}
	for _, f := range r.Decl.Hidden {
		w.kinds = append(w.kinds, colTypeOf(f.Kind))
	}
	for _, f := range r.Decl.Task {
		w.taskKinds = append(w.taskKinds, colTypeOf(f.Kind))
	}
	for i, c := range world.CostFields {
		w.costReported[i] = r.Decl.Cost.Reports(c)
	}
	return w
}

func (w *unitWriter) close() {
	for _, inst := range w.insts {
		inst.Close()
	}
}

// runner returns the worker's runner of configuration c.
func (w *unitWriter) runner(c Config) (lab.Runner, error) {
	if rn, ok := w.runners[c.ID]; ok {
		return rn, nil
	}
	var rn lab.Runner
	var err error
	switch {
	case w.opt.Runners != nil:
		rn, err = w.opt.Runners(c, w.plan)
	case w.r.Spec.Runs != nil:
		rn, err = w.recordRunner(c)
	default:
		var inst lab.Instance
		if inst, err = w.r.Def.Open(c.Params, c.Model); err == nil {
			w.insts = append(w.insts, inst)
			rn, err = inst.Runner(w.plan)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("config %d: %w", c.ID, err)
	}
	w.runners[c.ID] = rn
	return rn, nil
}

// recordRunner returns the runner of configuration c of a recorded
// population: the world's record runner over the opened source.
func (w *unitWriter) recordRunner(c Config) (lab.Runner, error) {
	if w.r.Source == nil {
		return nil, fmt.Errorf("the recorded population %s is not open (Resolved.OpenRuns)", w.r.Spec.Runs.Source)
	}
	inst, err := w.r.Def.Open(c.Params, c.Model)
	if err != nil {
		return nil, err
	}
	w.insts = append(w.insts, inst)
	rec, ok := inst.(lab.Recorder)
	if !ok {
		return nil, fmt.Errorf("world %s cannot fork recorded runs", w.r.Decl.Name)
	}
	rr, err := rec.Recorded(w.plan)
	if err != nil {
		return nil, err
	}
	return recordRunner{rr: rr, src: w.r.Source}, nil
}

// progress reports finished seeds in batches of at least progressBatch
// (4096, or 1 for a costly runner's slow seeds), or all outstanding ones
// when flush is set.
func (w *unitWriter) progress(seeds, errs int, flush bool) {
	if w.opt.Progress == nil {
		return
	}
	w.unreported += seeds
	w.unreportedErr += errs
	if w.unreported >= w.progressBatch || flush && w.unreported > 0 {
		w.opt.Progress(w.unreported, w.unreportedErr)
		w.unreported, w.unreportedErr = 0, 0
	}
}

// each calls f for every table file of the unit.
func (w *unitWriter) each(f func(*tableFile) error) error {
	if err := f(w.tasks); err != nil {
		return err
	}
	for i := range w.forks {
		ft := &w.forks[i]
		for _, t := range []*tableFile{ft.checkpoints, ft.branches, ft.pairs} {
			if err := f(t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *unitWriter) run(ctx context.Context, u Unit) (e ledgerEntry, err error) {
	name := fmt.Sprintf("part-%06d.parquet", u.Index)
	cdir := fmt.Sprintf("config_id=%d", u.Config)
	where := fmt.Sprintf("unit %s/%s", cdir, name)
	defer func() {
		if err != nil {
			w.each(func(t *tableFile) error { t.abort(); return nil })
		}
	}()
	rn, err := w.runner(w.r.Configs[u.Config])
	if err != nil {
		return e, err
	}
	buffered := w.opt.Buffered
	w.progressBatch = 4096
	if c, ok := rn.(interface{ Costly() bool }); ok && c.Costly() {
		buffered = true
		w.progressBatch = 1
	}
	w.reported, w.seeds = 0, 0
	for {
		if err = w.open(u, buffered); err != nil {
			return e, fmt.Errorf("%s: %w", where, err)
		}
		err = rn.Run(ctx, u.Seeds.Start, u.Seeds.End, w.seed)
		if errors.Is(err, errRedo) && !buffered {
			if debugLayout {
				fmt.Fprintf(os.Stderr, "forklab: %s written again, buffered\n", where)
			}
			// A row did not fit the layout of files without errors:
			// write the unit again, buffered, to pick the layout from
			// its content.
			layoutRedos.Add(1)
			w.each(func(t *tableFile) error { t.abort(); return nil })
			buffered = true
			w.seeds = 0
			continue
		}
		if err != nil {
			return e, fmt.Errorf("%s: %w", where, err)
		}
		break
	}
	w.progress(0, 0, true)
	// Commit the files; the syncer writes the ledger entry once the last
	// of them is in place, while this worker goes on with the next unit.
	n := 0
	w.each(func(t *tableFile) error {
		if t.empty() {
			t.abort() // a fork step none of a recorded unit's runs has: no file
			t.skipped = true
		} else {
			n++
		}
		return nil
	})
	uf := &unitFiles{entry: ledgerEntry{Unit: u, Errors: w.errors, Cost: w.cost, Labels: slices.Clone(w.labels)}, left: n, dir: w.dir, done: w.done}
	if err = w.each(func(t *tableFile) error {
		if t.skipped {
			return nil
		}
		return t.commit(w.sync, uf.add)
	}); err != nil {
		return e, fmt.Errorf("%s: %w", where, err)
	}
	// The syncer fills uf.entry's files from here on; the caller gets the
	// entry through done.
	return ledgerEntry{Unit: u}, nil
}

// layoutRedos counts the units written again buffered because a row did
// not fit the streamed layout: a few for a sweep with errors, none for a
// clean one (the tests read it).
var layoutRedos atomic.Int64

// unitFiles collects a unit's files as the syncer puts them in place, and
// writes its ledger entry after the last.
type unitFiles struct {
	mu    sync.Mutex
	entry ledgerEntry
	left  int
	dir   string
	done  func(ledgerEntry, error)
}

func (uf *unitFiles) add(fi FileInfo) {
	rel, _ := filepath.Rel(uf.dir, fi.Path)
	fi.Path = filepath.ToSlash(rel)
	uf.mu.Lock()
	uf.entry.Files = append(uf.entry.Files, fi)
	uf.left--
	last := uf.left == 0
	uf.mu.Unlock()
	if !last {
		return
	}
	e := uf.entry
	sort.Slice(e.Files, func(i, j int) bool { return e.Files[i].Path < e.Files[j].Path })
	b, err := json.Marshal(e)
	if err == nil {
		err = atomicfile.WriteFile(filepath.Join(uf.dir, ledgerDir, e.Unit.ID()+".json"), b)
	}
	if err != nil {
		err = fmt.Errorf("unit %s: ledger: %w", e.Unit.ID(), err)
	}
	uf.done(e, err)
}

// open starts the unit's files.
func (w *unitWriter) open(u Unit, buffered bool) error {
	name := fmt.Sprintf("part-%06d.parquet", u.Index)
	cdir := fmt.Sprintf("config_id=%d", u.Config)
	if err := w.tasks.open(filepath.Join(w.dir, "tasks", cdir), name, buffered); err != nil {
		return err
	}
	seeds := int(u.Seeds.Len())
	w.tasks.reserve(seeds)
	for i, f := range w.r.Spec.ForkAt {
		fdir := fmt.Sprintf("fork_step=%d", f)
		ft := &w.forks[i]
		ft.arena, ft.errs, ft.transcripts = ft.arena[:0], ft.errs[:0], ft.transcripts[:0]
		for _, o := range []struct {
			table string
			t     *tableFile
		}{{"checkpoints", ft.checkpoints}, {"branches", ft.branches}, {"pairs", ft.pairs}} {
			if err := o.t.open(filepath.Join(w.dir, o.table, cdir, fdir), name, buffered); err != nil {
				return err
			}
		}
		ft.checkpoints.reserve(seeds)
		ft.branches.reserve(seeds * w.plan.Branches())
		ft.pairs.reserve(seeds * (len(w.plan.Arms) - 1))
	}
	w.errors, w.cost = 0, world.Cost{}
	w.labels = w.labels[:0]
	for _, f := range w.r.Spec.ForkAt {
		for _, a := range w.plan.Arms[1:] {
			w.labels = append(w.labels, LabelCount{Config: u.Config, ForkStep: f, Arm: a})
		}
	}
	return nil
}

// putCost writes the cost columns from column i on: the reported fields of
// c, NULL for the others or when null is set.
func (w *unitWriter) putCost(t *tableFile, i int, c world.Cost, null bool) {
	r := &w.costReported
	if null || !r[0] {
		t.putNull(i)
	} else {
		t.putInt64(i, c.Steps)
	}
	if null || !r[1] {
		t.putNull(i + 1)
	} else {
		t.putInt64(i+1, c.Tokens)
	}
	if null || !r[2] {
		t.putNull(i + 2)
	} else {
		t.putDouble(i+2, c.USD)
	}
	if null || !r[3] {
		t.putNull(i + 3)
	} else {
		t.putDouble(i+3, c.Seconds)
	}
}

// putValues writes declared values from column i on, of the column types
// types; all null when null is set.
func putValues(t *tableFile, i int, types []colType, vals []world.Value, null bool) {
	if null || len(vals) < len(types) {
		for k := range types {
			t.putNull(i + k)
		}
		return
	}
	for k, typ := range types {
		v := &vals[k]
		switch {
		case v.Null:
			t.putNull(i + k)
		case typ == colInt64:
			t.putInt64(i+k, v.I)
		case typ == colBool:
			t.putBool(i+k, v.I != 0)
		case typ == colDouble:
			t.putDouble(i+k, v.F)
		default:
			t.putString(i+k, v.S)
		}
	}
}

func colTypeOf(k world.Kind) colType {
	switch k {
	case world.Bool:
		return colBool
	case world.Int:
		return colInt64
	case world.Float:
		return colDouble
	}
	return colDict
}

// noiseKey writes a branch's noise key as the branches table (and the
// protocol) holds it: 16 lowercase hex digits.
func noiseKey(k uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[k&15]
		k >>= 4
	}
	return string(b[:])
}

// The positions of the fixed columns the unit writer writes by index, in
// the column order of schemas/tables.go: seed, status and error of tasks
// and checkpoints; the fixed front of branches and pairs (their cost
// columns are four from brCost on, in world.CostFields order). Where a
// table's declared columns begin, and the columns after them (run_id,
// metadata, transcript), are found by name in newUnitWriter; checkpoint
// and the extra_ columns are counted from the declared ones.
// TestFixedColumnPositions holds all of it to schemas.TableColumns.
const (
	colSeed   = 0 // tasks, checkpoints, branches, pairs
	colStatus = 1 // tasks, checkpoints: status, then error
	cpOver    = 3

	brArm        = 1
	brReplica    = 2
	brNoiseKey   = 3
	brStatus     = 4 // then error
	brIntervened = 6
	brSuccess    = 7
	brScore      = 8
	brCost       = 9
	brDetails    = 13

	prArm              = 1
	prReplicas         = 2
	prStatus           = 3 // then error
	prControlWins      = 5
	prTreatmentWins    = 6
	prControlSuccess   = 7
	prTreatmentSuccess = 8
	prLabel            = 9
	prQuadrant         = 10
	prFault            = 11
	prScoreControl     = 12
	prScoreTreated     = 13
	prScoreDiff        = 14
)

// putStatus writes the status and error columns (colStatus, and the one
// after) of a row of tasks or checkpoints.
func putStatus(t *tableFile, errText string, keep *[]string) {
	putStatus2(t, colStatus, errText, keep)
}

// seed writes one seed's rows: its task, then per fork step its
// checkpoint, branches and pairs.
func (w *unitWriter) seed(res *lab.SeedResult) error {
	t := w.tasks
	putSeed(t, res)
	putStatus(t, res.Err, &w.taskErr)
	putValues(t, w.taskCol, w.taskKinds, res.Task, res.Err != "")
	putRun(t, w.taskRun, res)
	if len(res.Metadata) > 0 {
		t.putString(w.taskMeta, string(res.Metadata))
	} else {
		t.putNull(w.taskMeta)
	}
	if flushed, err := t.end(); err != nil {
		return err
	} else if flushed {
		w.taskErr = w.taskErr[:0]
	}
	seedErrs := 0
	K := w.plan.Replicas
	nf := len(w.r.Decl.Features)
	for i := range w.forks {
		ft := &w.forks[i]
		var f *lab.ForkResult
		forkErr := res.Err
		if forkErr == "" {
			f = &res.Forks[i]
			forkErr = f.Err
			if f.Absent {
				continue // a recorded run without a checkpoint here
			}
		}
		if forkErr == "" && w.score != nil {
			w.checkScores(f)
		}
		// checkpoints
		cp := ft.checkpoints
		putSeed(cp, res)
		putStatus(cp, forkErr, &ft.errs)
		if forkErr != "" {
			cp.putNull(cpOver)
			putValues(cp, w.cpFeat, w.kinds, nil, true)
			w.putCost(cp, w.cpFeat+len(w.kinds), world.Cost{}, true)
			cp.putNull(w.cpFeat + len(w.kinds) + 4)
		} else {
			cp.putBool(cpOver, f.Over)
			putValues(cp, w.cpFeat, w.kinds[:nf], f.Features, false)
			putValues(cp, w.cpFeat+nf, w.kinds[nf:], f.Hidden, false)
			w.putCost(cp, w.cpFeat+len(w.kinds), f.Cost, f.NoCost)
			start := len(ft.arena)
			ft.arena = append(ft.arena, f.Checkpoint...)
			cp.putString(w.cpFeat+len(w.kinds)+4, unsafe.String(unsafe.SliceData(ft.arena[start:]), len(f.Checkpoint)))
			w.cost = w.cost.Add(f.Cost)
		}
		putRun(cp, w.cpRun, res)
		if flushed, err := cp.end(); err != nil {
			return err
		} else if flushed {
			ft.arena, ft.errs = ft.arena[:0], ft.errs[:0]
		}
		// branches
		br := ft.branches
		for ai, arm := range w.plan.Arms {
			for rep := range K {
				putSeed(br, res)
				br.putString(brArm, string(arm))
				br.putInt32(brReplica, int32(rep))
				bErr := forkErr
				var b *lab.BranchResult
				if bErr == "" {
					b = &f.Branches[ai*K+rep]
					bErr = b.Err
					br.putString(brNoiseKey, noiseKey(fork.BranchKey(res.Seed, f.ForkStep, arm, rep, f.Fires)))
				} else {
					br.putNull(brNoiseKey) // no checkpoint: no branch was drawn
				}
				putStatus2(br, brStatus, bErr, &ft.errs)
				if bErr != "" {
					br.putNull(brIntervened)
					br.putNull(brSuccess)
					br.putNull(brScore)
					w.putCost(br, brCost, world.Cost{}, true)
					br.putNull(brDetails)
					br.putNull(w.transcriptCol)
				} else {
					br.putBool(brIntervened, b.Intervened)
					br.putBool(brSuccess, b.Success)
					if b.Score != nil && w.score != nil {
						br.putDouble(brScore, *b.Score)
					} else {
						br.putNull(brScore)
					}
					w.putCost(br, brCost, b.Cost, false)
					if len(b.Details) > 0 {
						ft.errs = append(ft.errs, string(b.Details))
						br.putString(brDetails, ft.errs[len(ft.errs)-1])
					} else {
						br.putNull(brDetails)
					}
					if len(b.Transcript) > 0 {
						start := len(ft.transcripts)
						ft.transcripts = append(ft.transcripts, b.Transcript...)
						br.putString(w.transcriptCol, unsafe.String(unsafe.SliceData(ft.transcripts[start:]), len(b.Transcript)))
					} else {
						br.putNull(w.transcriptCol)
					}
					w.cost = w.cost.Add(b.Cost)
				}
				putRun(br, w.brRun, res)
				if flushed, err := br.end(); err != nil {
					return err
				} else if flushed {
					ft.transcripts = ft.transcripts[:0]
					if cp.rows == 0 {
						ft.errs = ft.errs[:0]
					}
				}
			}
		}
		// pairs
		pr := ft.pairs
		var offWins int
		var offCost [4]float64
		var offScore float64
		offErr := forkErr
		for ai, arm := range w.plan.Arms {
			wins, armErr := 0, forkErr
			var sum [4]float64
			var score float64
			if forkErr == "" {
				for rep := range K {
					b := &f.Branches[ai*K+rep]
					if b.Err != "" && armErr == "" {
						armErr = fmt.Sprintf("%s replica %d: %s", arm, rep, b.Err)
					}
					if b.Success {
						wins++
					}
					if b.Score != nil {
						score += *b.Score
					}
					sum[0] += float64(b.Cost.Steps)
					sum[1] += float64(b.Cost.Tokens)
					sum[2] += b.Cost.USD
					sum[3] += b.Cost.Seconds
				}
			}
			score /= float64(K)
			if arm == fork.Off {
				offWins, offCost, offScore, offErr = wins, sum, score, armErr
				continue
			}
			pErr := offErr
			if pErr == "" {
				pErr = armErr
			}
			putSeed(pr, res)
			pr.putString(prArm, string(arm))
			pr.putInt32(prReplicas, int32(K))
			putStatus2(pr, prStatus, pErr, &ft.errs)
			lc := &w.labels[i*(len(w.plan.Arms)-1)+ai-1]
			if pErr != "" {
				seedErrs++
				lc.Errors++
				for c := prControlWins; c < w.pairFeat; c++ {
					pr.putNull(c)
				}
				if forkErr == "" {
					// The checkpoint is fine: its features still say
					// where the error happened.
					putValuesAt(pr, w.pairFeat, w.kinds, f.Features, f.Hidden, nf)
				} else {
					putValues(pr, w.pairFeat, w.kinds, nil, true)
				}
				for k := range 4 {
					pr.putNull(w.pairFeat + len(w.kinds) + k)
				}
			} else {
				control, treatment := fork.Majority(offWins, K), fork.Majority(wins, K)
				label, quad := fork.Classify(control, treatment)
				switch label {
				case fork.Rescued:
					lc.Rescued++
				case fork.Harmed:
					lc.Harmed++
				default:
					lc.Unchanged++
				}
				pr.putInt32(prControlWins, int32(offWins))
				pr.putInt32(prTreatmentWins, int32(wins))
				pr.putBool(prControlSuccess, control)
				pr.putBool(prTreatmentSuccess, treatment)
				pr.putString(prLabel, string(label))
				pr.putString(prQuadrant, string(quad))
				if w.faultIdx >= 0 {
					pr.putBool(prFault, f.Hidden[w.faultIdx].I != 0)
				} else {
					pr.putNull(prFault)
				}
				if w.score != nil {
					pr.putDouble(prScoreControl, offScore)
					pr.putDouble(prScoreTreated, score)
					pr.putDouble(prScoreDiff, w.score.RoundDiff(score-offScore))
				} else {
					pr.putNull(prScoreControl)
					pr.putNull(prScoreTreated)
					pr.putNull(prScoreDiff)
				}
				putValuesAt(pr, w.pairFeat, w.kinds, f.Features, f.Hidden, nf)
				for k := range 4 {
					if w.costReported[k] {
						pr.putDouble(w.pairFeat+len(w.kinds)+k, (sum[k]-offCost[k])/float64(K))
					} else {
						pr.putNull(w.pairFeat + len(w.kinds) + k)
					}
				}
			}
			putRun(pr, w.prRun, res)
			if _, err := pr.end(); err != nil {
				return err
			}
		}
	}
	w.errors += int64(seedErrs)
	// A redone unit reports only the seeds it had not reported yet.
	if w.seeds++; w.seeds > w.reported {
		w.reported++
		w.progress(1, seedErrs, false)
	}
	return nil
}

// putSeed writes the seed column of a row of res: NULL for a recorded
// run without a seed.
func putSeed(t *tableFile, res *lab.SeedResult) {
	if res.NoSeed {
		t.putNull(colSeed)
	} else {
		t.putInt64(colSeed, int64(res.Seed))
	}
}

// putRun writes the run_id column (i) of a row of res: a recorded run's
// id; NULL for a seed's run, whose files leave the column out (the views
// give its decimal seed).
func putRun(t *tableFile, i int, res *lab.SeedResult) {
	if res.RunID == "" {
		t.putNull(i)
	} else {
		t.putString(i, res.RunID)
	}
}

// checkScores makes an error of each branch of f whose score a scored
// world may not report: none, or one outside the declared range (an agent's
// reply is refused before this, naming the field; a built-in world that
// breaks its own declaration is caught here). The branch, and so its
// pairs, become error rows.
func (w *unitWriter) checkScores(f *lab.ForkResult) {
	for j := range f.Branches {
		b := &f.Branches[j]
		switch {
		case b.Err != "":
		case b.Score == nil:
			b.Err = fmt.Sprintf("world %s declares a score, but the branch reported none", w.r.Decl.Name)
		default:
			if err := w.score.Check(*b.Score); err != nil {
				b.Err = fmt.Sprintf("world %s: %v", w.r.Decl.Name, err)
			}
		}
	}
}

// putValuesAt writes features then hidden values from column i on.
func putValuesAt(t *tableFile, i int, types []colType, features, hidden []world.Value, nf int) {
	putValues(t, i, types[:nf], features, false)
	putValues(t, i+nf, types[nf:], hidden, false)
}

// putStatus2 writes the status and error columns at i and i+1.
func putStatus2(t *tableFile, i int, errText string, keep *[]string) {
	if errText == "" {
		t.putString(i, schemas.StatusOK)
		t.putNull(i + 1)
		return
	}
	*keep = append(*keep, errText)
	t.putString(i, schemas.StatusError)
	t.putString(i+1, (*keep)[len(*keep)-1])
}
