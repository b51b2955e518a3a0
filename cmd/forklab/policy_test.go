package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A grid sweep has one guard rule per configuration: forklab policy --out
// refuses to choose (exit 2, naming the choices), --config picks one, and
// --out-dir writes them all; each rule names its world, version,
// configuration and fork step. forklab sql sees the search of every
// configuration (issue 10 item 3).
func TestPolicyPerConfiguration(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "grid")
	mustRun(t, "sweep", "--spec", "../../testdata/specs/grid-stall.yaml", "--out", dir, "-q")

	out, errs, code := run(t, "policy", dir, "--out", filepath.Join(dir, "p.json"))
	if code != 2 || !strings.Contains(errs, "--config 0 --fork-at 3 (config 0 (p_stall 0) · fork step 3: recover when same_obs = true)") ||
		!strings.Contains(errs, "--config 1 --fork-at 3 (config 1 (p_stall 0.2)") || !strings.Contains(errs, "--out-dir DIR") {
		t.Fatalf("--out on a grid: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "p.json")); err == nil {
		t.Fatal("a refused --out left a file")
	}
	if !strings.Contains(out, "POLICY SEARCH · arm on · config 0 (p_stall 0) · fork step 3") || !strings.Contains(out, "POLICY SEARCH · arm on · config 1 (p_stall 0.2) · fork step 3") {
		t.Fatalf("the search does not say which configuration:\n%s", out)
	}

	one := filepath.Join(t.TempDir(), "one.json")
	mustRun(t, "policy", dir, "--config", "1", "--out", one)
	var rule struct {
		World        string `json:"world"`
		WorldVersion string `json:"world_version"`
		ConfigID     *int   `json:"config_id"`
		ForkStep     *int   `json:"fork_step"`
		All          []struct {
			Feature string `json:"feature"`
		} `json:"all"`
	}
	b, err := os.ReadFile(one)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rule); err != nil {
		t.Fatal(err)
	}
	if rule.World != "counter" || rule.WorldVersion == "" || rule.ConfigID == nil || *rule.ConfigID != 1 || rule.ForkStep == nil || *rule.ForkStep != 3 {
		t.Fatalf("rule of config 1: %s", b)
	}
	if len(rule.All) == 1 && rule.All[0].Feature == "same_obs" {
		t.Errorf("config 1 (stalls) got same_obs alone, which lets harms through: %s", b)
	}

	all := filepath.Join(t.TempDir(), "rules")
	mustRun(t, "policy", dir, "--out-dir", all)
	for _, f := range []string{"policy-config-0-fork-3.json", "policy-config-1-fork-3.json"} {
		if _, err := os.Stat(filepath.Join(all, f)); err != nil {
			t.Errorf("--out-dir: %v", err)
		}
	}
	if _, errs, code := run(t, "policy", dir, "--config", "2"); code != 2 || !strings.Contains(errs, "configs 0 to 1") {
		t.Errorf("--config 2: exit %d, %q", code, errs)
	}

	got := mustRun(t, "sql", dir, "SELECT DISTINCT config_id, fork_step FROM policy_search ORDER BY ALL", "--format", "csv")
	if got != "config_id,fork_step\n0,3\n1,3\n" {
		t.Errorf("policy_search searches %q", got)
	}
	got = mustRun(t, "sql", dir, "SELECT p_stall, count(*) AS n FROM pairs GROUP BY ALL ORDER BY ALL", "--format", "csv")
	if got != "p_stall,n\n0.0,2000\n0.2,2000\n" {
		t.Errorf("pairs by p_stall: %q", got)
	}
}

// The seed's own query runs unchanged on a counter sweep.
func TestSeedQueryOnPairs(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "sweep", "--out", dir, "-q", "--overwrite")
	got := mustRun(t, "sql", dir, "SELECT same_obs, label, count(*) FROM pairs GROUP BY ALL ORDER BY ALL", "--format", "csv")
	if got != "same_obs,label,count_star()\nfalse,harmed,83\nfalse,unchanged,72\ntrue,rescued,75\ntrue,unchanged,70\n" {
		t.Fatalf("the seed's query: %q", got)
	}
	got = mustRun(t, "sql", dir, "SELECT feature, count(*) AS n FROM features GROUP BY ALL ORDER BY ALL", "--format", "csv")
	if got != "feature,n\nbudget_left,300\nobs_value,300\nrepeat_run,300\nsame_obs,300\nsteps_used,300\n" {
		t.Fatalf("features: %q", got)
	}
}
