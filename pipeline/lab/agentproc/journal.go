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
	"slices"
	"strconv"
	"sync"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/world"
)

// A journal keeps the seeds an agent finished without error, one JSON line
// per seed — the agent's own start result and branch results, as it sent
// them — appended as each block of seeds completes, before the sweep writes
// the seeds' unit, so that a sweep killed at any moment and resumed asks the
// agent again for no seed it had finished: a paid fork is paid for once. A
// seed replayed from the journal goes through the same decoding as a fresh
// reply. Seeds with an error are not kept, so a resumed sweep asks for them
// again.
//
// One file holds one block of seeds of one configuration under one plan
// and declaration: its name is a hash of those and the block's bounds. A
// line torn by a kill is skipped when read. Writes are not synced: a
// killed process loses nothing the kernel accepted; a crashed machine may
// lose the last seeds, which are then asked for again.

// journalSeed is one journal line.
type journalSeed struct {
	Seed  uint64     `json:"seed"`
	Spent world.Cost `json:"spent"`
	// Start is the start result; Branch the branch result of each fork.
	Start  json.RawMessage   `json:"start"`
	Branch []json.RawMessage `json:"branch"`
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

// add appends seeds finished without error, in one write.
func (j *journal) add(seeds []*journalSeed) error {
	if len(seeds) == 0 {
		return nil
	}
	n := 0
	for _, s := range seeds {
		n += len(s.Start) + 128
		for _, b := range s.Branch {
			n += len(b) + 1
		}
	}
	b := make([]byte, 0, n)
	for _, s := range seeds {
		b = append(b, `{"seed":`...)
		b = strconv.AppendUint(b, s.Seed, 10)
		b = append(b, `,"spent":{"steps":`...)
		b = strconv.AppendInt(b, s.Spent.Steps, 10)
		b = append(b, `,"tokens":`...)
		b = strconv.AppendInt(b, s.Spent.Tokens, 10)
		b = append(b, `,"usd":`...)
		b = strconv.AppendFloat(b, s.Spent.USD, 'g', -1, 64)
		b = append(b, `,"seconds":`...)
		b = strconv.AppendFloat(b, s.Spent.Seconds, 'g', -1, 64)
		b = append(b, `},"start":`...)
		b = append(b, s.Start...)
		b = append(b, `,"branch":[`...)
		for i, r := range s.Branch {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, r...)
		}
		b = append(b, "]}\n"...)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("agent journal %s: %w", j.path, err)
	}
	return nil
}

// journalCost is what the seeds kept in the journal files in dir cost when
// the agent played them (each seed once, as it will be replayed): the
// cost of every seed finished without error in earlier runs of a sweep.
func journalCost(dir string) (world.Cost, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return world.Cost{}, err
	}
	var total world.Cost
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return world.Cost{}, fmt.Errorf("agent journal: %w", err)
		}
		seen := map[uint64]world.Cost{}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), MaxLine)
		for sc.Scan() {
			var s struct {
				Seed  uint64     `json:"seed"`
				Spent world.Cost `json:"spent"`
			}
			if json.Unmarshal(sc.Bytes(), &s) == nil {
				seen[s.Seed] = s.Spent // the last line of a seed is the one replayed
			}
		}
		f.Close()
		seeds := make([]uint64, 0, len(seen))
		for seed := range seen {
			seeds = append(seeds, seed)
		}
		slices.Sort(seeds) // a sum in seed order: the same bits every time
		for _, seed := range seeds {
			total = total.Add(seen[seed])
		}
	}
	return total, nil
}

// covers reports whether every seed of [lo, hi) was in the journal when it
// was opened: such a block is replayed without asking the agent.
func (j *journal) covers(lo, hi uint64) bool {
	for s := lo; s < hi; s++ {
		if j.done[s] == nil {
			return false
		}
	}
	return true
}

func (j *journal) close() {
	if j != nil && j.f != nil {
		j.f.Close()
	}
}
