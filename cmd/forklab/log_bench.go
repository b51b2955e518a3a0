package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/forklab/forklab/internal/plural"
	"github.com/forklab/forklab/stream/bench"
)

func init() {
	var (
		targets, pids           []string
		loads                   string
		producers, body, events int
		duration, warmup        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench --target NAME=URL [--target NAME=URL …]",
		Short: "Load a Durable Streams server: concurrent producers' appends/s and latency, and a catch-up read",
		Long: `Drive one or more Durable Streams servers with the same load, over HTTP:
producers with one append in flight each, one stream each, for --duration
after --warmup; then a catch-up read of --catchup-events small JSON events
from offset -1. --loads lists the loads as PRODUCERSxBYTES (default: one
load, --producers x --body). The first target is the baseline the others
are compared with; --pid NAME=PID reports that server's resident memory
after each load (from /proc), to show whether it stays flat.`,
		Example: `  forklab log bench --target forklab=http://127.0.0.1:4437 --target ref=http://127.0.0.1:4438 \
      --loads 16x100,64x100,256x100,16x1024,16x65536`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if len(targets) == 0 {
				return usageErr("give at least one --target NAME=URL")
			}
			type load struct{ producers, body int }
			var ls []load
			if loads == "" {
				ls = []load{{producers, body}}
			} else {
				for _, l := range strings.Split(loads, ",") {
					p, b, ok := strings.Cut(strings.TrimSpace(l), "x")
					np, err1 := strconv.Atoi(p)
					nb, err2 := strconv.Atoi(b)
					if !ok || err1 != nil || err2 != nil {
						return usageErr("--loads %q: want PRODUCERSxBYTES,… with 1-%d producers and 1 B-16 MiB bodies (e.g. 16x100,64x100)", loads, maxBenchProducers)
					}
					ls = append(ls, load{np, nb})
				}
			}
			for _, l := range ls {
				if l.producers <= 0 || l.producers > maxBenchProducers || l.body <= 0 || l.body > maxBenchBody {
					return usageErr("--loads: a load of %s and %d-byte bodies: want 1-%d producers and 1 B-16 MiB bodies", plural.Count(l.producers, "producer"), l.body, maxBenchProducers)
				}
			}
			if err := onceEach("target", targets, keyOf); err != nil {
				return err
			}
			if err := onceEach("pid", pids, keyOf); err != nil {
				return err
			}
			var ts []bench.Target
			for _, t := range targets {
				name, u, ok := strings.Cut(t, "=")
				if !ok || name == "" || !strings.HasPrefix(u, "http") {
					return usageErr("--target %q: want NAME=http://host:port", t)
				}
				ts = append(ts, bench.Target{Name: name, URL: u})
			}
			pidOf := map[string]int{}
			for _, p := range pids {
				name, v, ok := strings.Cut(p, "=")
				n, err := strconv.Atoi(v)
				if !ok || err != nil || n <= 0 || n > maxPID {
					return usageErr("--pid %q: want NAME=PID, PID an integer in [1, %d]", p, maxPID)
				}
				pidOf[name] = n
			}
			ctx := c.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			out := c.OutOrStdout()
			fmt.Fprintf(out, "load: producers with one append in flight each, one stream each, %s measured after %s warm-up\n", duration, warmup)
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "target\tproducers\tbody\tappends/s\tMB/s\tp50\tp99\tmax\tretries\tRSS\t")
			type key struct {
				target string
				load   load
			}
			res := map[key]bench.AppendResult{}
			for _, l := range ls {
				for _, t := range ts {
					a, err := bench.Appends(ctx, t, bench.AppendConfig{Producers: l.producers, BodyBytes: l.body, Duration: duration, Warmup: warmup})
					if err != nil {
						return fmt.Errorf("%s: %w", t.Name, err)
					}
					res[key{t.Name, l}] = a
					fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%.1f\t%s\t%s\t%s\t%d\t%s\t\n", t.Name, l.producers, size(l.body), a.PerSecond,
						a.PerSecond*float64(l.body)/1e6, ms(a.P50), ms(a.P99), ms(a.Max), a.Errors, rss(pidOf[t.Name]))
				}
			}
			tw.Flush()
			for i := 1; i < len(ts); i++ {
				for _, l := range ls {
					a, b := res[key{ts[0].Name, l}], res[key{ts[i].Name, l}]
					fmt.Fprintf(out, "%s vs %s, %s × %s: appends/s ×%.2f, p99 ×%.2f\n", ts[0].Name, ts[i].Name, plural.Count(l.producers, "producer"), size(l.body),
						a.PerSecond/b.PerSecond, float64(a.P99)/float64(b.P99))
				}
			}
			if events == 0 {
				return nil
			}
			fmt.Fprintf(out, "catch-up: %d JSON events (~40 B each, appended 1000 per request), read from offset -1\n", events)
			tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "target\tcatch-up read\tevents/s\tRSS\t")
			reads := make([]bench.CatchUpResult, len(ts))
			for i, t := range ts {
				r, err := bench.CatchUp(ctx, t, bench.CatchUpConfig{Events: events})
				if err != nil {
					return fmt.Errorf("%s catch-up: %w", t.Name, err)
				}
				reads[i] = r
				fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t\n", t.Name, r.Read.Round(time.Millisecond), r.PerSecond, rss(pidOf[t.Name]))
			}
			tw.Flush()
			for i := 1; i < len(ts); i++ {
				fmt.Fprintf(out, "%s vs %s: catch-up read time ×%.2f\n", ts[0].Name, ts[i].Name, float64(reads[0].Read)/float64(reads[i].Read))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&targets, "target", nil, "NAME=URL of a server to load (repeatable; the first is the baseline)")
	f.StringArrayVar(&pids, "pid", nil, "NAME=PID: report that target's resident memory after each load (repeatable)")
	f.StringVar(&loads, "loads", "", "loads to run, PRODUCERSxBYTES,… (default: --producers x --body)")
	intFlag(f, &producers, "producers", 16, 1, maxBenchProducers, "concurrent producers, one stream each")
	intFlag(f, &body, "body", 100, 1, maxBenchBody, "bytes per append")
	durationFlag(f, &duration, "duration", 10*time.Second, time.Millisecond, 24*time.Hour, "measured time per target and load")
	durationFlag(f, &warmup, "warmup", 2*time.Second, 0, time.Hour, "unmeasured time before it")
	intFlag(f, &events, "catchup-events", 1000000, 0, 1000000000, "events in the catch-up read test (0 skips it)")
	logCmd.AddCommand(cmd)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

// size renders a byte count: 100 B, 1 KiB, 64 KiB.
func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// rss is a process's resident memory and its peak, from /proc; "-" when
// there is no such process.
func rss(pid int) string {
	if pid <= 0 {
		return "-"
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "-"
	}
	var cur, peak string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			cur = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			peak = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("%s (peak %s)", mib(cur), mib(peak))
}

func mib(kb string) string {
	n, err := strconv.Atoi(strings.TrimSuffix(kb, " kB"))
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%d MiB", n>>10)
}
