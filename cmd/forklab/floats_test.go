package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A float a float64 cannot hold — 1e-400, which strconv, encoding/json and
// YAML decoders all read as 0 without a word, 1e400, NaN, ±Inf — is
// refused with exit 2 naming where it was given and the valid range, in
// every way a float reaches forklab: a world's parameter flag in every
// subcommand that has it, --param, --max-error-rate, --max-cost, a spec
// file's keys (testdata/specs/unheld), an agent's timeout. (The bounded
// flags, --temperature and the others, are TestNumericFlagsRefuseOutOfRange's.)
func TestFloatsAFloat64CannotHold(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	spec := func(name string) string { return repoFile(t, "testdata/specs/unheld/"+name) }
	const small = "1e-400 is too small for a float64: it would read as 0"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--seeds", "0:10", "--p-stall", "1e-400", "--out", out}, "forklab: --p-stall: p_stall must be a number in [0, 1]; " + small},
		{[]string{"sweep", "--seeds", "0:10", "--p-stall", "-1e-400", "--out", out}, "forklab: --p-stall: p_stall must be a number in [0, 1]; -1e-400 is too small"},
		{[]string{"sweep", "--seeds", "0:10", "--p-stall", "NaN", "--out", out}, "forklab: --p-stall: p_stall must be a number in [0, 1]; NaN is not a number"},
		{[]string{"sweep", "--seeds", "0:10", "--p-stall", "1e400", "--out", out}, `forklab: --p-stall: p_stall must be a number in [0, 1], got "1e400"`},
		{[]string{"sweep", "--seeds", "0:10", "--param", "p_stall=1e-400", "--out", out}, "forklab: --param p_stall=1e-400: p_stall must be a number in [0, 1]; " + small},
		{[]string{"checkpoint", "--seed", "0", "--p-obs-noise", "1e-400"}, "forklab: --p-obs-noise: p_obs_noise must be a number in [0, 1]; " + small},
		{[]string{"chaos", "--p-stall", "1e-400"}, "forklab: --p-stall: p_stall must be a number in [0, 1]; " + small},
		{[]string{"agent", "run", "--session", "s", "--seed", "1", "--p-stall", "1e-400"}, "forklab: --p-stall: p_stall must be a number in [0, 1]; " + small},
		{[]string{"sweep", "--world", "toolloop", "--param", "p_fault=1e-400", "--out", out}, "forklab: --param p_fault=1e-400: p_fault must be a number in"},
		{[]string{"sweep", "--max-error-rate", "1e-400", "--out", out}, "forklab: --max-error-rate: " + small + "; must be a share in [0, 1]"},
		{[]string{"sweep", "--max-cost", "usd=1e-400", "--out", out}, "forklab: --max-cost: " + small + "; each amount must be a finite number above 0"},
		{[]string{"sweep", "--spec", spec("param-underflow.yaml"), "--out", out}, "param-underflow.yaml: params.p_stall: " + small + "; p_stall must be a number in [0, 1]"},
		{[]string{"sweep", "--spec", spec("grid-nan.yaml"), "--out", out}, "grid-nan.yaml: grid.p_stall[1]: .nan is not a number; p_stall must be a number in [0, 1]"},
		{[]string{"sweep", "--spec", spec("param-overflow.yaml"), "--out", out}, "param-overflow.yaml: params.p_stall: 1e400 is too large for a float64; p_stall must be a number in [0, 1]"},
		{[]string{"sweep", "--spec", spec("temperature-underflow.json"), "--out", out}, "temperature-underflow.json: model.temperature: 1e-999 is too small for a float64: it would read as 0; model.temperature must be a number in [0, 1]"},
		{[]string{"sweep", "--spec", spec("timeout-underflow.json"), "--out", out}, "timeout-underflow.json: agent.timeout: " + small + "; agent.timeout must be a duration in [1ms, 24h]"},
		{[]string{"sweep", "--spec", spec("error-rate-underflow.json"), "--out", out}, "error-rate-underflow.json: max_error_rate: 4.9e-330 is too small for a float64: it would read as 0; max_error_rate must be a share in [0, 1]"},
	} {
		_, stderr, code := run(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("forklab %s: exit %d, %q; want 2 and one line with %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
	// 5e-324, the least float64 above 0, is held and taken.
	mustRun(t, "checkpoint", "--seed", "0", "--p-stall", "5e-324")
}
