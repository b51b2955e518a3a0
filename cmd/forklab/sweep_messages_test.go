package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// An --agent world's parameters have no flags of their own: a parameter
// flag of a built-in world, or a flag named like the agent's parameter, is
// refused pointing to --param NAME=VALUE, listing the parameters as
// --param name=… (the refusal once listed "--horizon, --mode" as if they
// were flags, and --horizon then failed as an unknown flag).
func TestAgentWorldParamMessages(t *testing.T) {
	agent := forklabBin + " agent serve --world toolloop"
	out := filepath.Join(t.TempDir(), "o")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"built-in world's flag", []string{"--target", "7"}, []string{
			"forklab: --target is not a parameter of world toolloop (its parameters, set with --param NAME=VALUE: --param budget_max=…, --param budget_min=…, ",
			"--param k_max=…, ", "--param token_verify=…)"}},
		{"agent's parameter as a flag", []string{"--horizon", "4"}, []string{
			"forklab: unknown flag: --horizon (see 'forklab sweep --help'); a parameter of an --agent world has no flag of its own: set it with --param horizon=VALUE"}},
		{"dashed name", []string{"--p-hard=0.5"}, []string{
			"(see 'forklab sweep --help'); a parameter of an --agent world has no flag of its own: set it with --param p_hard=VALUE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := run(t, append([]string{"sweep", "--agent", agent, "--seeds", "0:2", "--out", out}, tc.args...)...)
			for _, w := range tc.want {
				if code != 2 || !strings.Contains(stderr, w) {
					t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, w)
				}
			}
			if strings.Contains(stderr, "--k-max,") {
				t.Errorf("lists an agent's parameters as flags: %s", stderr)
			}
		})
	}
	// A built-in world's refusal still lists its own flags, which exist.
	_, stderr, code := run(t, "sweep", "--world", "toolloop", "--target", "7", "--out", out)
	if want := "forklab: --target is not a parameter of world toolloop (its parameters: --budget-max, "; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
}
