package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/forklab/forklab/stream/bench"
)

func init() {
	var (
		targets                 []string
		producers, body, events int
		duration, warmup        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "bench --target NAME=URL [--target NAME=URL …]",
		Short: "Load a Durable Streams server: concurrent producers' appends/s and latency, and a catch-up read",
		Long: `Drive one or more Durable Streams servers with the same load, over HTTP:
--producers concurrent producers, one stream each, one append of --body bytes
in flight per producer, for --duration after --warmup; then a catch-up read of
--catchup-events small JSON events from offset -1. The first target is the
baseline the others are compared with.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if len(targets) == 0 {
				return usageErr("give at least one --target NAME=URL")
			}
			if producers <= 0 || body <= 0 || duration <= 0 {
				return usageErr("--producers, --body and --duration must be positive")
			}
			var ts []bench.Target
			for _, t := range targets {
				name, u, ok := strings.Cut(t, "=")
				if !ok || name == "" || !strings.HasPrefix(u, "http") {
					return usageErr("--target %q: want NAME=http://host:port", t)
				}
				ts = append(ts, bench.Target{Name: name, URL: u})
			}
			ctx := c.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			out := c.OutOrStdout()
			fmt.Fprintf(out, "load: %d producers, one stream each, one request in flight each, %d-byte bodies, %s measured after %s warm-up\n",
				producers, body, duration, warmup)
			if events > 0 {
				fmt.Fprintf(out, "catch-up: %d JSON events (~40 B each, appended 1000 per request), read from offset -1\n", events)
			}
			type row struct {
				a bench.AppendResult
				r bench.CatchUpResult
			}
			rows := make([]row, len(ts))
			for i, t := range ts {
				a, err := bench.Appends(ctx, t, bench.AppendConfig{Producers: producers, BodyBytes: body, Duration: duration, Warmup: warmup})
				if err != nil {
					return fmt.Errorf("%s: %w", t.Name, err)
				}
				rows[i].a = a
				if events > 0 {
					r, err := bench.CatchUp(ctx, t, bench.CatchUpConfig{Events: events})
					if err != nil {
						return fmt.Errorf("%s catch-up: %w", t.Name, err)
					}
					rows[i].r = r
				}
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "target\tappends/s\tp50\tp99\tmax\tretries\tcatch-up read\tevents/s\t")
			for i, t := range ts {
				a, r := rows[i].a, rows[i].r
				cu, eps := "-", "-"
				if events > 0 {
					cu, eps = r.Read.Round(time.Millisecond).String(), fmt.Sprintf("%.0f", r.PerSecond)
				}
				fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%d\t%s\t%s\t\n", t.Name, a.PerSecond, ms(a.P50), ms(a.P99), ms(a.Max), a.Errors, cu, eps)
			}
			tw.Flush()
			for i := 1; i < len(ts); i++ {
				fmt.Fprintf(out, "%s vs %s: appends/s ×%.2f, p99 ×%.2f", ts[0].Name, ts[i].Name,
					rows[0].a.PerSecond/rows[i].a.PerSecond, float64(rows[0].a.P99)/float64(rows[i].a.P99))
				if events > 0 {
					fmt.Fprintf(out, ", catch-up read time ×%.2f", float64(rows[0].r.Read)/float64(rows[i].r.Read))
				}
				fmt.Fprintln(out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&targets, "target", nil, "NAME=URL of a server to load (repeatable; the first is the baseline)")
	f.IntVar(&producers, "producers", 16, "concurrent producers, one stream each")
	f.IntVar(&body, "body", 100, "bytes per append")
	f.DurationVar(&duration, "duration", 10*time.Second, "measured time per target")
	f.DurationVar(&warmup, "warmup", 2*time.Second, "unmeasured time before it")
	f.IntVar(&events, "catchup-events", 1000000, "events in the catch-up read test (0 skips it)")
	logCmd.AddCommand(cmd)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
