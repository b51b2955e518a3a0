package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// numericFlags is every numeric flag of every subcommand with its valid
// range, written out here independently of the code that declares it
// (issue 12 G). TestEveryNumericFlagIsBounded fails on a numeric flag
// missing from it.
var numericFlags = []struct {
	cmd, flag, want string
}{
	{"agent check", "fork-at", "an integer in [1, 1048576]"},
	{"agent check", "timeout", "a duration in [1ms, 24h]"},
	{"agent run", "delay", "a duration in [0s, 1h]"},
	{"agent run", "no-tool", "a number in [0, 1]"},
	{"agent run", "retry-for", "a duration in [0s, 24h]"},
	{"fork", "retry-for", "a duration in [0s, 24h]"},
	{"fork", "timeout", "a duration in [1ms, 24h]"},
	{"agent run", "seed", "an integer in [0, 9223372036854775806]"},
	{"agent run", "temperature", "a number in [0, 1]"},
	{"agent run", "until", "an integer in [0, 1048576]"},
	{"chaos", "delay", "a duration in [0s, 1h]"},
	{"chaos", "kills", "an integer in [0, 1000000]"},
	{"chaos", "no-tool", "a number in [0, 1]"},
	{"chaos", "parallel", "an integer in [1, 1024]"},
	{"chaos", "restarts", "an integer in [0, 10000]"},
	{"chaos", "seed", "an integer in [0, 9223372036854675]"},
	{"chaos", "sessions", "an integer in [1, 100000]"},
	{"chaos", "sink-kills", "an integer in [0, 100000]"},
	{"chaos", "temperature", "a number in [0, 1]"},
	{"chaos", "zombies", "an integer in [0, 1000000]"},
	{"checkpoint", "fork-at", "an integer in [1, 1048576]"},
	{"checkpoint", "no-tool", "a number in [0, 1]"},
	{"checkpoint", "seed", "an integer in [0, 9223372036854775806]"},
	{"checkpoint", "temperature", "a number in [0, 1]"},
	{"fork", "replica", "an integer in [0, 999]"},
	{"kafka serve", "nodes", "an integer in [1, 64]"},
	{"log bench", "body", "an integer in [1, 16777216]"},
	{"log bench", "catchup-events", "an integer in [0, 1000000000]"},
	{"log bench", "duration", "a duration in [1ms, 24h]"},
	{"log bench", "producers", "an integer in [1, 4096]"},
	{"log bench", "warmup", "a duration in [0s, 1h]"},
	{"log serve", "append-timeout", "a duration in [1ms, 1h]"},
	{"log serve", "body-timeout", "a duration in [1ms, 1h]"},
	{"log serve", "cache-mb", "an integer in [1, 1048576]"},
	{"log serve", "header-timeout", "a duration in [1ms, 1h]"},
	{"log serve", "idle-timeout", "a duration in [1ms, 24h]"},
	{"log serve", "kafka-port", "an integer in [0, 65535]"},
	{"log serve", "long-poll-timeout", "a duration in [1ms, 1h]"},
	{"log serve", "max-body", "an integer in [1, 67108864]"},
	{"log serve", "max-conns", "an integer in [0, 1048576]"},
	{"log serve", "max-conns-per-client", "an integer in [0, 1048576]"},
	{"log serve", "partitions", "an integer in [1, 100000]"},
	{"log serve", "replication-factor", "-1 (the cluster's default) or an integer in [1, 32767]"},
	{"log serve", "write-timeout", "a duration in [1ms, 1h]"},
	{"log sink", "rotate-interval", "a duration in [1ms, 24h]"},
	{"log sink", "dial-timeout", "a duration in [100ms, 10m]"},
	{"log serve", "dial-timeout", "a duration in [100ms, 10m]"},
	{"sweep", "dial-timeout", "a duration in [100ms, 10m]"},
	{"worker", "dial-timeout", "a duration in [100ms, 10m]"},
	{"worker", "retry-for", "a duration in [1s, 168h]"},
	{"sweep", "retry-for", "a duration in [1s, 168h]"},
	{"log sink", "retry-for", "a duration in [1s, 168h]"},
	{"log sink", "rotate-records", "an integer in [1, 10000000]"},
	{"gate", "max-harm-rate", "a number in [0, 1]"},
	{"gate", "max-harmed", "an integer in [0, 9007199254740992]"},
	{"gate", "min-net", "an integer in [-9007199254740992, 9007199254740992]"},
	{"gate", "min-net-rate", "a number in [-1, 1]"},
	{"gate", "max-p", "a number in (0, 1]"},
	{"gate", "max-error-rate", "a number in [0, 1]"},
	{"gate", "min-score-diff", "a number in [-1e+06, 1e+06]"},
	{"policy", "config", "-1 (every one) or an integer in [0, 9999]"},
	{"policy", "fork-at", "-1 (every one) or an integer in [1, 1048576]"},
	{"policy", "holdout", "a number in (0, 1)"},
	{"policy", "max-harm", "an integer in [0, 9007199254740992]"},
	{"show", "config", "-1 (the sweep's only configuration) or an integer in [0, 9999]"},
	{"show", "fork-step", "0 (the sweep's only fork step) or an integer in [1, 1048576]"},
	{"show", "replica", "an integer in [0, 999]"},
	{"show", "seed", "an integer in [0, 9223372036854775806]"},
	{"sweep", "lease", "a duration in [1s, 24h]"},
	{"sweep", "log-parallel", "an integer in [1, 1024]"},
	{"sweep", "max-attempts", "an integer in [1, 100]"},
	{"sweep", "no-tool", "a number in [0, 1]"},
	{"sweep", "parallel", "an integer in [0, 1024]"},
	{"sweep", "partitions", "an integer in [1, 100000]"},
	{"sweep", "replicas", "an integer in [1, 1000]"},
	{"sweep", "retries", "an integer in [0, 100]"},
	{"sweep", "temperature", "a number in [0, 1]"},
	{"sweep", "timeout", "a duration in [1ms, 24h]"},
	{"sweep", "unit-seeds", "an integer in [0, 16777216]"},
	{"sweep", "workers", "an integer in [0, 4096]"},
	{"sweep finalize", "poll", "a duration in [10ms, 1h]"},
	{"sweep finalize", "wait", "a duration in [0s, 720h]"},
	{"worker", "max-units", "an integer in [0, 65536]"},
	{"worker", "parallel", "an integer in [0, 4096]"},
	{"worker", "partitions", "an integer in [1, 100000]"},
	{"worker", "session-timeout", "a duration in [6s, 30m]"},
}

// numericTypes are the pflag types that hold numbers.
var numericTypes = []string{"int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64",
	"float", "float32", "float64", "duration", "intSlice", "int32Slice", "int64Slice", "uintSlice", "float32Slice", "float64Slice", "durationSlice", "count"}

// eachFlag calls f for every flag of every command under rootCmd.
func eachFlag(f func(c *cobra.Command, fl *pflag.Flag)) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(fl *pflag.Flag) { f(c, fl) })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(rootCmd)
}

// Every numeric flag of every subcommand is a bounded flag, listed in
// numericFlags with the range its help and its errors name.
func TestEveryNumericFlagIsBounded(t *testing.T) {
	listed := map[string]string{}
	for _, nf := range numericFlags {
		listed["forklab "+nf.cmd+" --"+nf.flag] = nf.want
	}
	seen := 0
	eachFlag(func(c *cobra.Command, fl *pflag.Flag) {
		key := c.CommandPath() + " --" + fl.Name
		rf, bounded := fl.Value.(rangeFlag)
		if !bounded && !slices.Contains(numericTypes, fl.Value.Type()) {
			return
		}
		seen++
		want, ok := listed[key]
		switch {
		case !bounded:
			t.Errorf("%s is a numeric flag (%s) without a range: declare it with intFlag, durationFlag, … (cmd/forklab/bounds.go)", key, fl.Value.Type())
		case !ok:
			t.Errorf("%s (%s) is not in numericFlags", key, rf.Range())
		case rf.Range() != want:
			t.Errorf("%s: range %q, want %q", key, rf.Range(), want)
		case !strings.HasSuffix(fl.Usage, "; "+want):
			t.Errorf("%s: the help %q does not end with its range", key, fl.Usage)
		}
	})
	if seen != len(numericFlags) {
		t.Errorf("%d numeric flags in the commands, %d in numericFlags", seen, len(numericFlags))
	}
}

var rangeRE = regexp.MustCompile(`^(?:(-?\d+) \([^)]*\) or )?(an integer|a number|a duration) in ([\[(])([^,]+), ([^\])]+)([\])])$`)

// probes returns, for a range as numericFlags writes it, values just inside
// both ends (accepted), values just outside (refused), and a value that
// does not fit the flag's type at all (refused, never wrapped).
func probes(t *testing.T, want, typ string) (inside, outside []string, overflow string) {
	m := rangeRE.FindStringSubmatch(want)
	if m == nil {
		t.Fatalf("range %q: cannot read it", want)
	}
	alt, kind, lo, hi := m[1], m[2], m[4], m[5]
	openLo, openHi := m[3] == "(", m[6] == ")"
	switch kind {
	case "an integer":
		l, _ := strconv.ParseInt(lo, 10, 64)
		h, _ := strconv.ParseInt(hi, 10, 64)
		inside = []string{lo, hi}
		outside = []string{strconv.FormatInt(h+1, 10)}
		if l > 0 || typ != "uint64" {
			outside = append(outside, strconv.FormatInt(l-1, 10))
		} else {
			outside = append(outside, "-1")
		}
		if alt != "" {
			inside = append(inside, alt)
			if a, _ := strconv.ParseInt(alt, 10, 64); a == l-1 {
				outside = outside[:1] // l-1 is the alternative
				outside = append(outside, strconv.FormatInt(a-1, 10))
			}
		}
		overflow = "9223372036854775808"
		if typ == "uint64" {
			overflow = "18446744073709551616"
		}
	case "a number":
		l, _ := strconv.ParseFloat(lo, 64)
		h, _ := strconv.ParseFloat(hi, 64)
		inside = []string{lo, hi}
		outside = []string{strconv.FormatFloat(l-1e-9, 'g', -1, 64), strconv.FormatFloat(h+1e-9, 'g', -1, 64), "NaN", "Inf"}
		if openLo {
			inside[0] = strconv.FormatFloat(l+1e-9, 'g', -1, 64)
			outside = append(outside, lo)
		}
		if openHi {
			inside[1] = strconv.FormatFloat(h-1e-9, 'g', -1, 64)
			outside = append(outside, hi)
		}
		overflow = "1e400"
	case "a duration":
		l, err1 := time.ParseDuration(lo)
		h, err2 := time.ParseDuration(hi)
		if err1 != nil || err2 != nil {
			t.Fatalf("range %q: %v %v", want, err1, err2)
		}
		inside = []string{lo, hi}
		outside = []string{(l - time.Nanosecond).String(), (h + time.Nanosecond).String()}
		overflow = "2562048h" // past what a time.Duration holds
	}
	return inside, outside, overflow
}

// Every numeric flag takes the ends of its range and refuses anything past
// them, or past its type, before the command runs: exit 2 and one line
// naming the flag, the value and the valid range. No value wraps around.
func TestNumericFlagsRefuseOutOfRange(t *testing.T) {
	for _, nf := range numericFlags {
		t.Run(strings.ReplaceAll(nf.cmd, " ", "_")+"--"+nf.flag, func(t *testing.T) {
			c, _, err := rootCmd.Find(strings.Fields(nf.cmd))
			if err != nil {
				t.Fatal(err)
			}
			fl := c.Flags().Lookup(nf.flag)
			if fl == nil {
				t.Fatalf("forklab %s has no --%s", nf.cmd, nf.flag)
			}
			inside, outside, overflow := probes(t, nf.want, fl.Value.Type())
			defer fl.Value.Set(fl.DefValue)
			for _, v := range inside {
				if err := fl.Value.Set(v); err != nil {
					t.Errorf("--%s %s (inside %s) refused: %v", nf.flag, v, nf.want, err)
				}
			}
			for _, v := range append(outside, overflow) {
				err := fl.Value.Set(v)
				if err == nil {
					t.Errorf("--%s %s (outside %s) accepted as %s", nf.flag, v, nf.want, fl.Value)
				} else if !strings.HasSuffix(err.Error(), "must be "+nf.want) {
					t.Errorf("--%s %s: %q does not name the range %q", nf.flag, v, err, nf.want)
				}
			}
			// A float literal a float64 cannot hold is refused, naming
			// why and the range, even where what it would read as (0,
			// ±Inf) is inside the range: no silent underflow to 0.
			why := map[string]string{}
			if fl.Value.Type() == "float" {
				why = map[string]string{"1e-400": "1e-400 is too small for a float64: it would read as 0; ",
					"-1e-400": "-1e-400 is too small for a float64: it would read as 0; ", "0x1p-2000": "0x1p-2000 is too small for a float64: it would read as 0; ",
					"1e400": "1e400 is too large for a float64; ", "NaN": "NaN is not a number; ", "-Inf": "-Inf is not finite; "}
				for v, w := range why {
					if err := fl.Value.Set(v); err == nil || err.Error() != w+"must be "+nf.want {
						t.Errorf("--%s %s: %v, want %q", nf.flag, v, err, w+"must be "+nf.want)
					}
				}
			}
			// As a user meets it: the binary, with a value past what the
			// flag's type holds (it must not wrap around into the range).
			args := append(strings.Fields(nf.cmd), "--"+nf.flag+"="+overflow)
			_, stderr, code := run(t, args...)
			want := fmt.Sprintf(`forklab: invalid argument %q for "--%s" flag: %smust be %s (see 'forklab %s --help')`, overflow, nf.flag, why[overflow], nf.want, nf.cmd)
			if code != 2 || strings.TrimSpace(stderr) != want {
				t.Errorf("forklab %s: exit %d, %q; want 2 and %q", strings.Join(args, " "), code, stderr, want)
			}
		})
	}
}

// The examples (12 G): the per-parameter flags of every world go
// through the world's declared ranges in every subcommand that has them —
// no base_budget wraps to −2147483648, and none is so large that a run
// never ends; a fork step is refused past what the world's runs reach in
// checkpoint and agent run as in sweep; a seed range too large to hold is
// refused naming the bound instead of running for ever.
func TestWorldFlagsAndSeedsBounded(t *testing.T) {
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--seeds", "0:50", "--base-budget", "2147483648", "--out", out}, "forklab: --base-budget: base_budget must be an integer in [1, 1048576], got 2147483648"},
		{[]string{"sweep", "--seeds", "0:50", "--base-budget", "2147483647", "--out", out}, "forklab: --base-budget: base_budget must be an integer in [1, 1048576], got 2147483647"},
		{[]string{"sweep", "--seeds", "0:50", "--param", "base_budget=2147483648", "--out", out}, "forklab: --param base_budget=2147483648: base_budget must be an integer in [1, 1048576], got 2147483648"},
		{[]string{"checkpoint", "--seed", "0", "--base-budget", "2147483648"}, "forklab: --base-budget: base_budget must be an integer in [1, 1048576], got 2147483648"},
		{[]string{"chaos", "--base-budget", "2147483648"}, "forklab: --base-budget: base_budget must be an integer in [1, 1048576], got 2147483648"},
		{[]string{"agent", "run", "--session", "s", "--seed", "1", "--base-budget", "2147483648"}, "forklab: --base-budget: base_budget must be an integer in [1, 1048576], got 2147483648"},
		{[]string{"checkpoint", "--seed", "0", "--fork-at", "100000"}, "forklab: --fork-at: step 100000 is past the most steps a run can take (9): no run reaches it (fork steps are integers in [1, 9] here)"},
		{[]string{"sweep", "--seeds", "0:10", "--fork-at", "100000", "--out", out}, "forklab: --fork-at: step 100000 is past the most steps a run can take (9): no run reaches it (fork steps are integers in [1, 9] here)"},
		{[]string{"agent", "run", "--session", "s", "--seed", "1", "--until", "100000"}, "forklab: --until: step 100000 is past the most steps a run can take (9): no run reaches it (fork steps are integers in [1, 9] here)"},
		{[]string{"checkpoint", "--seed", "0", "--base-budget", "20", "--fork-at", "23"}, "forklab: --fork-at: step 23 is past the most steps a run can take (22): no run reaches it (fork steps are integers in [1, 22] here)"},
		{[]string{"sweep", "--seeds", "0:9223372036854775807", "--out", out}, "forklab: --seeds: 0:9223372036854775807 is 70368744177664 units of 131072 seeds in each of 1 configuration; a sweep holds at most 65536 units (its manifest lists every unit's files): sweep at most 8589934592 seeds at a time (e.g. 0:8589934592), or raise unit_seeds (up to 16777216)"},
		{[]string{"sweep", "--seeds", "0:9223372036854775808", "--out", out}, `forklab: --seeds: seed range "0:9223372036854775808" is malformed: want START:END with integers 0 <= START < END <= 9223372036854775807 (END is exclusive: seeds are integers in [0, 9223372036854775806]), e.g. 0:300`},
		{[]string{"sweep", "--seeds", "9223372036854775807:9223372036854775808", "--out", out}, `forklab: --seeds: seed range "9223372036854775807:9223372036854775808" is malformed: want START:END with integers 0 <= START < END <= 9223372036854775807 (END is exclusive: seeds are integers in [0, 9223372036854775806])`},
		{[]string{"sweep", "--seeds", "0:8589934593", "--out", out}, "forklab: --seeds: 0:8589934593 is 65537 units of 131072 seeds"},
		{[]string{"sweep", "--seeds", "0:300000000000", "--fork-at", "1-9", "--arms", "off,on,placebo,aa", "--replicas", "1000", "--unit-seeds", "16777216", "--out", out}, "forklab: --seeds: 0:300000000000 would make more than 9007199254740992 branch rows (36000 per seed: fork steps × arms × replicas × configurations)"},
		{[]string{"sweep", "--fork-at", "1-99999999999999999999", "--out", out}, "forklab: --fork-at: fork step 99999999999999999999 is out of range: steps are integers in [1, 1048576]"},
		{[]string{"sweep", "--shard", "0/99999999999999999999", "--out", out}, `forklab: --shard: share "0/99999999999999999999" is malformed: want I/N with integers 0 <= I < N <= 1048576`},
		{[]string{"sweep", "--max-error-rate", "200%", "--out", out}, `forklab: --max-error-rate: must be a share in [0, 1] (0% to 100%), such as 1% or 0.05, got "200%"`},
		{[]string{"sweep", "--max-cost", "tokens=1e400", "--out", out}, `forklab: --max-cost: 1e400 is too large for a float64; each amount must be a finite number above 0`},
		{[]string{"agent", "check", "--seeds", "0:99999999999999999999", "exit 3"}, `forklab: --seeds: seed range "0:99999999999999999999" is malformed: want START:END with integers 0 <= START < END <= 9223372036854775807 (END is exclusive: seeds are integers in [0, 9223372036854775806])`},
		{[]string{"kafka", "serve", "--ports", "1,2,70000"}, `forklab: --ports "1,2,70000": want 3 port numbers, each an integer in [1, 65535], comma-separated`},
		{[]string{"log", "bench", "--target", "a=http://127.0.0.1:1", "--loads", "99999999999999999999x1"}, `forklab: --loads "99999999999999999999x1": want PRODUCERSxBYTES,… with 1-4096 producers and 1 B-16 MiB bodies`},
		{[]string{"log", "bench", "--target", "a=http://127.0.0.1:1", "--pid", "a=99999999999"}, `forklab: --pid "a=99999999999": want NAME=PID, PID an integer in [1, 4194304]`},
	} {
		_, stderr, code := run(t, tc.args...)
		if code != 2 || !strings.HasPrefix(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("forklab %s: exit %d, %q; want 2 and one line starting %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
	// Nothing of a refused sweep is left, beside --out or in it.
	if es, _ := os.ReadDir(tmp); len(es) != 0 {
		t.Errorf("refused commands left %v", es)
	}
	// Every parameter flag of every built-in world just past its declared
	// range, refused naming the range: all of them in sweep, the first of
	// each world in the other commands that have them (the same code).
	for _, def := range lab.Definitions() {
		d := def.Declaration()
		if d.Name == "faulty" {
			continue // the tests' own world
		}
		for i, p := range d.Params {
			v, ok := pastRange(p)
			if !ok {
				continue
			}
			want := fmt.Sprintf("forklab: --%s: %s must be %s, got %s", flagName(p.Name), p.Name, p.Range(), v)
			commands := [][]string{{"sweep", "--out", out}}
			if i == 0 {
				commands = append(commands, []string{"checkpoint", "--seed", "0"}, []string{"chaos"}, []string{"agent", "run", "--session", "s", "--seed", "1"})
			}
			for _, args := range commands {
				args = append(args, "--world", d.Name, "--"+flagName(p.Name), v)
				_, stderr, code := run(t, args...)
				if code != 2 || strings.TrimSpace(stderr) != want {
					t.Errorf("forklab %s: exit %d, %q; want 2 and %q", strings.Join(args, " "), code, stderr, want)
				}
			}
		}
	}
}

// pastRange is a value just past p's declared range (above its maximum),
// as its flag would be given; false for a parameter without a maximum.
func pastRange(p world.Param) (string, bool) {
	if p.Max == nil {
		return "", false
	}
	switch p.Kind {
	case world.ParamInt, world.ParamIntList:
		return strconv.FormatInt(int64(*p.Max)+1, 10), true
	case world.ParamFloat, world.ParamFloatList:
		return strconv.FormatFloat(*p.Max+0.5, 'g', -1, 64), true
	}
	return "", false
}

// specBounds is every numeric key of a sweep spec, each with a file of
// testdata/specs/bounds just past its range and one past what its type
// holds, and the line forklab sweep --spec FILE answers (issue 12 G).
var specBounds = []struct {
	key, file, want string
}{
	{"seeds", "seeds-too-many", "forklab: seeds: 0:9223372036854775807 is 70368744177664 units of 131072 seeds in each of 1 configuration; a sweep holds at most 65536 units"},
	{"seeds", "seeds-overflow", `forklab: spec FILE: seed range "0:99999999999999999999" is malformed: want START:END with integers 0 <= START < END <= 9223372036854775807 (END is exclusive: seeds are integers in [0, 9223372036854775806])`},
	{"fork_at", "fork-at-past-world", "forklab: fork_at: step 12 is past the most steps a run can take (9): no run reaches it (fork steps are integers in [1, 9] here)"},
	{"fork_at", "fork-at-out-of-range", "forklab: fork_at: steps must be integers in [1, 1048576], ascending, got [2000000]"},
	{"fork_at", "fork-at-overflow", "forklab: spec FILE: fork_at must be integers in [1, 1048576], got 1e+300"},
	{"fork_at", "fork-at-text-overflow", "forklab: spec FILE: fork_at: fork step 99999999999999999999 is out of range: steps are integers in [1, 1048576]"},
	{"replicas", "replicas-out-of-range", "forklab: replicas: must be an integer in [1, 1000], got 1001"},
	{"replicas", "replicas-overflow", "forklab: spec FILE: replicas must be an integer in [1, 1000], got 100000000000000000000"},
	{"unit_seeds", "unit-seeds-out-of-range", "forklab: unit_seeds: must be 0 (automatic) or an integer in [1, 16777216], got 16777217"},
	{"gate.max_harm_rate", "gate-max-harm-rate-out-of-range", "forklab: gate: max_harm_rate must be a number in [0, 1], got 2"},
	{"gate.max_harm_rate", "gate-max-harm-rate-overflow", "forklab: spec FILE: gate.max_harm_rate: 1e400 is too large for a float64; gate.max_harm_rate must be a number in [0, 1]"},
	{"gate.max_harmed", "gate-max-harmed-overflow", "forklab: spec FILE: gate.max_harmed must be an integer in [0, 9007199254740992], got 1e+30"},
	{"gate.per_arm.max_p", "gate-per-arm-max-p-out-of-range", "forklab: gate: per_arm.policy.max_p must be a number in (0, 1], got 0"},
	{"unit_seeds", "unit-seeds-overflow", "forklab: spec FILE: unit_seeds must be 0 (automatic) or an integer in [1, 16777216], got 1e+30"},
	{"params", "params-wrap-around", "forklab: params: base_budget must be an integer in [1, 1048576], got 2147483648"},
	{"params", "params-overflow", "forklab: params: base_budget must be an integer in [1, 1048576], got 100000000000000000000"},
	{"params", "params-float-overflow", `forklab: spec FILE: params.p_stall: 1e400 is too large for a float64; p_stall must be a number in [0, 1]`},
	{"model.temperature", "model-temperature-out-of-range", "forklab: model: temperature must be in [0, 1], got 2"},
	{"model.temperature", "model-temperature-overflow", "forklab: spec FILE: model.temperature: 1e400 is too large for a float64; model.temperature must be a number in [0, 1]"},
	{"model.no_tool", "model-no-tool-out-of-range", "forklab: model: no_tool must be in [0, 1], got -0.5"},
	{"model.no_tool", "model-no-tool-overflow", "forklab: spec FILE: model.no_tool: -1e400 is too large for a float64; model.no_tool must be a number in [0, 1]"},
	{"grid", "grid-value-out-of-range", "forklab: grid: base_budget must be an integer in [1, 1048576], got 2147483648"},
	{"grid", "grid-model-out-of-range", "forklab: grid: temperature must be a number in [0, 1], got 2"},
	{"grid", "grid-too-many", "forklab: grid: more than 10000 configurations (a grid makes one per combination of its values; at most 10000)"},
	{"agent.parallel", "agent-parallel-out-of-range", "forklab: agent.parallel: must be an integer in [1, 1024] (0: one per CPU), got 1025"},
	{"agent.parallel", "agent-parallel-overflow", "forklab: spec FILE: agent.parallel must be an integer in [1, 1024], got 100000000000000000000"},
	{"agent.timeout", "agent-timeout-out-of-range", "forklab: agent.timeout: must be a duration in [1ms, 24h] (0: the default 60s), got 25h0m0s"},
	{"agent.timeout", "agent-timeout-negative", "forklab: agent.timeout: must be a duration in [1ms, 24h] (0: the default 60s), got -1s"},
	{"agent.timeout", "agent-timeout-overflow", "forklab: spec FILE: duration 1e+300 seconds is out of range: want a duration in [1ms, 24h]"},
	{"agent.retries", "agent-retries-out-of-range", "forklab: agent.retries: must be an integer in [0, 100], got 101"},
	{"agent.retries", "agent-retries-overflow", "forklab: spec FILE: agent.retries must be an integer in [0, 100], got 100000000000000000000"},
	{"agent.fail_on_error", "agent-fail-on-error-out-of-range", "forklab: agent.fail_on_error: must be a share in [0, 1] (1: no limit), got 1.5"},
	{"agent.fail_on_error", "agent-fail-on-error-overflow", "forklab: spec FILE: agent.fail_on_error: 1e400 is too large for a float64; agent.fail_on_error must be a share in [0, 1]"},
	{"runs.runs", "runs-runs-out-of-range", "forklab: spec FILE: runs.runs: must be an integer in [0, 18446744073709551615], got -1"},
	{"runs.runs", "runs-runs-overflow", "forklab: spec FILE: runs.runs: must be an integer in [0, 18446744073709551615], got 1e+30"},
	{"runs.bytes", "runs-bytes-out-of-range", "forklab: spec FILE: runs.bytes: must be an integer in [0, 9223372036854775807], got -1"},
	{"runs.bytes", "runs-bytes-overflow", "forklab: spec FILE: runs.bytes: must be an integer in [0, 9223372036854775807], got 1e+30"},
	{"max_error_rate", "max-error-rate-out-of-range", "forklab: max_error_rate: must be a share in [0, 1], got 2"},
	{"max_error_rate", "max-error-rate-overflow", "forklab: spec FILE: max_error_rate: 1e400 is too large for a float64; max_error_rate must be a share in [0, 1]"},
	{"max_cost", "max-cost-out-of-range", "forklab: max_cost: steps must be a finite number above 0, got -1"},
	{"max_cost", "max-cost-overflow", "forklab: spec FILE: max_cost.steps: 1e400 is too large for a float64; max_cost must be a finite number above 0"},
}

// Every numeric key of a sweep spec file refuses a value past its range and
// one past its type with exit 2 and one line naming the key and the valid
// range, before anything starts (the agent files name a command that
// would fail if it ran). The keys are found by walking sweep.Spec, so a
// new numeric key without a case here fails the test.
func TestEverySpecKeyIsBounded(t *testing.T) {
	keys := map[string]bool{}
	numericKeys("", reflect.TypeOf(sweep.Spec{}), keys)
	covered := map[string]int{}
	for _, c := range specBounds {
		covered[c.key]++
	}
	for k := range keys {
		if covered[k] < 2 {
			t.Errorf("spec key %s has %d cases in specBounds; want one past its range and one past its type", k, covered[k])
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range specBounds {
		file := filepath.Join("..", "..", "testdata", "specs", "bounds", c.file+".yaml")
		_, stderr, code := run(t, "sweep", "--spec", file, "--out", out, "-q")
		want := strings.ReplaceAll(c.want, "FILE", file)
		if code != 2 || !strings.HasPrefix(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%s: exit %d, %q; want 2 and one line starting %q", c.file, code, stderr, want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused spec created the output directory")
	}
	if _, err := os.Stat(sweep.StagingDir(out)); err == nil {
		t.Error("a refused spec left a staging directory")
	}
}

// numericKeys adds to keys the JSON keys of t's fields that hold numbers
// (or a seed range, or the maps of world parameters and grid values),
// dotted below structs: agent.timeout, model.no_tool.
func numericKeys(prefix string, t reflect.Type, keys map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		switch {
		case ft == reflect.TypeOf(sweep.Range{}), ft == reflect.TypeOf(world.Params{}), key == "grid":
			keys[key] = true
		case ft.Kind() == reflect.Map && isNumber(ft.Elem().Kind()):
			keys[key] = true
		case ft.Kind() == reflect.Struct && key != "policy" && key != "declaration":
			numericKeys(key+".", ft, keys)
		case isNumber(ft.Kind()):
			keys[key] = true
		}
	}
}

func isNumber(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// Every --help and every message that states the seed range states the one
// range the code plays: seeds in [0, 2^63-2], a range's END exclusive and
// at most 2^63-1 (sweep --help said nothing of it and checkpoint --help
// said 9223372036854775806 while the doc said 2^63-1 was a seed).
func TestSeedRangeStatedAlike(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--help"}, "seeds are integers in [0, 9223372036854775806], so END is at most 9223372036854775807"},
		{[]string{"checkpoint", "--help"}, "[0, 9223372036854775806]"},
		{[]string{"agent", "run", "--help"}, "[0, 9223372036854775806]"},
	} {
		out, errs, _ := run(t, tc.args...)
		if !strings.Contains(strings.Join(strings.Fields(out+errs), " "), tc.want) {
			t.Errorf("forklab %s does not say %q:\n%s%s", strings.Join(tc.args, " "), tc.want, out, errs)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "agent-protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), "2^63−1]") || !strings.Contains(string(doc), "an integer in [0, 2^63−2]") {
		t.Errorf("docs/agent-protocol.md does not state seeds as integers in [0, 2^63−2]")
	}
}
