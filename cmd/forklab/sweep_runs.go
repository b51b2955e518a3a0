package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/agentproc"
	"github.com/forklab/forklab/pipeline/lab/recorded"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
)

// openRuns opens the recorded population spec.Runs names, for world decl
// (an external agent's when ext is set), and fills spec.Runs with what its
// listing found: the source (a file's absolute path), format, run count,
// size and checksum. Without forkAtGiven a file's records fork at their own
// steps, which become the spec's fork_at. A spec that recorded a listing
// already (a --resume) must list the same. Errors: a log that does not
// answer is a runtime failure (exit 1); anything else about the population
// is bad input (exit 2).
func openRuns(ctx context.Context, spec *sweep.Spec, decl world.Declaration, ext *agentproc.Definition, forkAtGiven bool, token string) (recorded.Source, error) {
	given := spec.Runs.Source
	source := given
	isFile := given != recorded.AgentSource && !strings.HasPrefix(given, "http://") && !strings.HasPrefix(given, "https://")
	if isFile {
		abs, err := filepath.Abs(given)
		if err != nil {
			return nil, asInput(fmt.Errorf("runs %s: %w", given, err))
		}
		source = abs
	}
	o := recorded.Options{Decl: decl, Builtin: ext == nil, Token: token}
	if forkAtGiven || !isFile {
		o.ForkAt = spec.ForkAt
	}
	if ext != nil {
		caps := ext.Capabilities()
		o.NeedFeatures = !caps.Inspect
		if given == recorded.AgentSource {
			if !caps.Runs {
				return nil, usageErr("--runs %s: agent world %s does not declare the runs capability: it cannot list the runs it holds (docs/agent-protocol.md, \"runs and load\"); export its runs to a file instead", recorded.AgentSource, decl.Name)
			}
			o.Agent = ext
		}
		if strings.HasPrefix(given, "http") {
			return nil, usageErr("--runs %s: a session-log prefix holds sessions of built-in worlds (forklab agent run); an external agent's sessions are its own events: list them with its runs method (--runs %s) or export its checkpoints to a file", given, recorded.AgentSource)
		}
	} else if given == recorded.AgentSource {
		return nil, usageErr("--runs %s lists an external agent's runs: give the agent with --agent CMD", recorded.AgentSource)
	}
	src, err := recorded.Open(ctx, given, o)
	if err != nil {
		if errors.Is(err, recorded.ErrUnreachable) {
			return nil, err
		}
		return nil, asInput(err)
	}
	now := sweep.Runs{Source: source}.FromListing(src.Listing())
	if old := *spec.Runs; old.Count != 0 && old != now {
		src.Close()
		return nil, asInput(fmt.Errorf("%w: %s listed %d runs (%d bytes, crc32c %s) when the sweep began, %d runs (%d bytes, crc32c %s) now: sweep it without --resume (a spec file names its runs by source alone: runs.runs, bytes and crc32c are what forklab recorded)",
			sweep.ErrPopulationChanged, source, old.Count, old.Bytes, old.CRC32C, now.Count, now.Bytes, now.CRC32C))
	}
	spec.Runs = &now
	if l := src.Listing(); !forkAtGiven && len(l.ForkSteps) > 0 {
		spec.ForkAt = l.ForkSteps
	}
	return src, nil
}

// runsInputErr says whether a sweep's error is the recorded population's
// fault — a record the world cannot use, a source that changed while it
// was read — which is bad input (exit 2) with nothing published.
func runsInputErr(err error) bool {
	return errors.Is(err, lab.ErrRecord) || errors.Is(err, recorded.ErrChanged) || errors.Is(err, sweep.ErrPopulationChanged)
}

// populationErr is the part of a sweep's error that names the record or
// the source, without the unit it was found in ("unit config_id=0/…:").
func populationErr(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if !strings.HasPrefix(e.Error(), "unit ") {
			return e
		}
	}
	return err
}
