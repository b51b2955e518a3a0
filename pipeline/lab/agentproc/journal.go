package agentproc

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/world"
)

// A journal keeps the seeds an agent finished without error, one JSON line
// per seed, appended as each seed completes — before the sweep writes the
// seed's unit — so that a sweep killed at any moment and resumed asks the
// agent again for no seed it had finished: a paid fork is paid for once.
// Seeds with an error are not kept, so a resumed sweep asks for them again.
//
// One file holds one block of seeds of one configuration under one plan
// and declaration: its name is a hash of those and the block's bounds. A
// line torn by a kill is skipped when read. Writes are not synced: a
// killed process loses nothing the kernel accepted; a crashed machine may
// lose the last seeds, which are then asked for again.

// journalSeed is one journal line.
type journalSeed struct {
	Seed  uint64        `json:"seed"`
	Task  []world.Value `json:"task"`
	Forks []journalFork `json:"forks"`
	Spent world.Cost    `json:"spent"`
}

type journalFork struct {
	ForkStep   int                `json:"fork_step"`
	Over       bool               `json:"over"`
	Checkpoint json.RawMessage    `json:"checkpoint"`
	Features   []world.Value      `json:"features"`
	Hidden     []world.Value      `json:"hidden"`
	Cost       world.Cost         `json:"cost"`
	Fires      bool               `json:"fires"`
	Branches   []lab.BranchResult `json:"branches"`
}

// journal is the open journal of one block of seeds.
type journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
	done map[uint64]*journalSeed
}

// journalKey names the journal files of one configuration and plan.
func journalKey(decl world.Declaration, params world.Params, model any, plan lab.Plan) (string, error) {
	b, err := json.Marshal(struct {
		Decl      world.Declaration `json:"decl"`
		Params    world.Params      `json:"params"`
		Model     any               `json:"model"`
		ForkSteps []int             `json:"fork_steps"`
		Arms      any               `json:"arms"`
		Replicas  int               `json:"replicas"`
	}{decl, params, model, plan.ForkSteps, plan.Arms, plan.Replicas})
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8]), nil
}

// openJournal reads the journal of seeds [lo, hi) under key in dir and
// opens it for appending.
func openJournal(dir, key string, lo, hi uint64) (*journal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent journal: %w", err)
	}
	j := &journal{path: filepath.Join(dir, fmt.Sprintf("%s-%d-%d.jsonl", key, lo, hi)), done: map[uint64]*journalSeed{}}
	if f, err := os.Open(j.path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), MaxLine)
		for sc.Scan() {
			var s journalSeed
			if json.Unmarshal(sc.Bytes(), &s) != nil || s.Seed < lo || s.Seed >= hi {
				continue // torn by a kill
			}
			j.done[s.Seed] = &s
		}
		f.Close()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("agent journal: %w", err)
	}
	f, err := os.OpenFile(j.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("agent journal: %w", err)
	}
	j.f = f
	return j, nil
}

// add appends a seed finished without error.
func (j *journal) add(s *journalSeed) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("agent journal %s: %w", j.path, err)
	}
	return nil
}

func (j *journal) close() {
	if j != nil && j.f != nil {
		j.f.Close()
	}
}

// toJournal copies a seed's results into a journal line.
func toJournal(res *lab.SeedResult, spent world.Cost) *journalSeed {
	s := &journalSeed{Seed: res.Seed, Task: append([]world.Value{}, res.Task...), Spent: spent}
	for _, f := range res.Forks {
		jf := journalFork{ForkStep: f.ForkStep, Over: f.Over, Checkpoint: append(json.RawMessage{}, f.Checkpoint...),
			Features: append([]world.Value{}, f.Features...), Hidden: append([]world.Value{}, f.Hidden...),
			Cost: f.Cost, Fires: f.Fires}
		for _, b := range f.Branches {
			b.Details = append(json.RawMessage(nil), b.Details...)
			jf.Branches = append(jf.Branches, b)
		}
		s.Forks = append(s.Forks, jf)
	}
	return s
}

// fromJournal fills res from a journal line; false when the line does not
// fit the plan (it is then played again).
func fromJournal(s *journalSeed, res *lab.SeedResult, plan lab.Plan) bool {
	if len(s.Forks) != len(plan.ForkSteps) {
		return false
	}
	res.Seed = s.Seed
	res.Task = append(res.Task[:0], s.Task...)
	for i, jf := range s.Forks {
		f := &res.Forks[i]
		if jf.ForkStep != plan.ForkSteps[i] || len(jf.Branches) != len(f.Branches) {
			return false
		}
		f.Over, f.Cost, f.Fires = jf.Over, jf.Cost, jf.Fires
		f.Checkpoint = append(f.Checkpoint[:0], jf.Checkpoint...)
		f.Features = append(f.Features[:0], jf.Features...)
		f.Hidden = append(f.Hidden[:0], jf.Hidden...)
		for k, b := range jf.Branches {
			details := append(f.Branches[k].Details[:0], b.Details...)
			f.Branches[k] = b
			f.Branches[k].Details = details
		}
	}
	return true
}
