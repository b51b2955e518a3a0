package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/forklab/forklab/internal/floattext"
	"github.com/forklab/forklab/internal/kafkadial"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/spf13/pflag"
)

// Every numeric flag of every subcommand is a bounded flag: it carries its
// valid range, and parsing refuses a value outside it — or one that does
// not parse, or does not fit (no wrap-around) — before the command runs.
// pflag words the refusal with the flag and the value, and main exits 2:
//
//	forklab: invalid argument "0" for "--replicas" flag: must be an integer in [1, 1000] (see 'forklab sweep --help')
//
// The range also ends the flag's help line. A test (TestEveryNumericFlagIsBounded)
// walks every command and fails on a numeric flag that is not bounded.

// boundedNumber is what a bounded flag may hold.
type boundedNumber interface {
	~int | ~int64 | ~uint64 | ~float64
}

// bounded is a pflag.Value for a number in [min, max] (or (min, max) for a
// float with open ends), and optionally one value outside it with a
// meaning of its own (-1: the cluster's default).
type bounded[T boundedNumber] struct {
	p                *T
	min, max         T
	openMin, openMax bool
	alt              *T
	altDoc           string
	kind             string // "int", "uint64", "float", "duration"
}

func (b *bounded[T]) String() string {
	if b.kind == "duration" {
		return time.Duration(*b.p).String()
	}
	return fmt.Sprint(*b.p)
}

func (b *bounded[T]) Type() string { return b.kind }

// Range words the valid values: "an integer in [1, 1000]", "a number in
// (0, 1)", "a duration in [1ms, 24h]", "-1 (the cluster's default) or an
// integer in [1, 32767]".
func (b *bounded[T]) Range() string {
	lo, hi := "[", "]"
	if b.openMin {
		lo = "("
	}
	if b.openMax {
		hi = ")"
	}
	var r string
	switch b.kind {
	case "float":
		r = "a number in " + lo + fmtNum(float64(b.min)) + ", " + fmtNum(float64(b.max)) + hi
	case "duration":
		r = "a duration in " + lo + fmtDuration(time.Duration(b.min)) + ", " + fmtDuration(time.Duration(b.max)) + hi
	default:
		r = "an integer in " + lo + fmt.Sprint(b.min) + ", " + fmt.Sprint(b.max) + hi
	}
	if b.alt != nil {
		r = fmt.Sprint(*b.alt) + " (" + b.altDoc + ") or " + r
	}
	return r
}

// errRange is the refusal Set returns; pflag puts the flag and the value
// before it.
func (b *bounded[T]) errRange() error { return errors.New("must be " + b.Range()) }

func (b *bounded[T]) Set(s string) error {
	s = strings.TrimSpace(s)
	var v T
	switch b.kind {
	case "float":
		f, err := floattext.Parse(s)
		if errors.Is(err, floattext.ErrNotFloat64) {
			// 1e-400 would read as 0, 1e400 as +Inf: refused, not rounded.
			return fmt.Errorf("%s; must be %s", trimNotFloat(err), b.Range())
		}
		if err != nil {
			return b.errRange()
		}
		v = T(f)
	case "duration":
		d, err := time.ParseDuration(s)
		if err != nil {
			if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
				return fmt.Errorf("a duration needs a unit, e.g. %ss: must be %s", s, b.Range())
			}
			return b.errRange()
		}
		v = T(d)
	case "uint64":
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return b.errRange()
		}
		v = T(u)
	default:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return b.errRange()
		}
		// The value must fit T (an int is 64 bits here, but say so).
		if int64(T(i)) != i {
			return b.errRange()
		}
		v = T(i)
	}
	if !b.ok(v) {
		return b.errRange()
	}
	*b.p = v
	return nil
}

func (b *bounded[T]) ok(v T) bool {
	if b.alt != nil && v == *b.alt {
		return true
	}
	if v < b.min || v > b.max || b.openMin && v == b.min || b.openMax && v == b.max {
		return false
	}
	return true
}

// rangeFlag is what every bounded flag implements; the test of every
// numeric flag asks for it.
type rangeFlag interface {
	pflag.Value
	Range() string
}

func addBounded[T boundedNumber](fs *pflag.FlagSet, b *bounded[T], name, short string, def T, usage string) *bounded[T] {
	*b.p = def
	if !b.ok(def) {
		panic(fmt.Sprintf("flag --%s: default %v outside %s", name, def, b.Range()))
	}
	fs.VarP(b, name, short, usage+"; "+b.Range())
	return b
}

// intFlag defines --name, an int in [lo, hi].
func intFlag(fs *pflag.FlagSet, p *int, name string, def, lo, hi int, usage string) *bounded[int] {
	return addBounded(fs, &bounded[int]{p: p, min: lo, max: hi, kind: "int"}, name, "", def, usage)
}

// intFlagOr is intFlag with one more valid value, alt, meaning altDoc.
func intFlagOr(fs *pflag.FlagSet, p *int, name string, def, lo, hi, alt int, altDoc, usage string) *bounded[int] {
	return addBounded(fs, &bounded[int]{p: p, min: lo, max: hi, alt: &alt, altDoc: altDoc, kind: "int"}, name, "", def, usage)
}

// int64Flag defines --name, an int64 in [lo, hi].
func int64Flag(fs *pflag.FlagSet, p *int64, name string, def, lo, hi int64, usage string) *bounded[int64] {
	return addBounded(fs, &bounded[int64]{p: p, min: lo, max: hi, kind: "int"}, name, "", def, usage)
}

// uint64Flag defines --name, a uint64 in [lo, hi].
func uint64Flag(fs *pflag.FlagSet, p *uint64, name string, def, lo, hi uint64, usage string) *bounded[uint64] {
	return addBounded(fs, &bounded[uint64]{p: p, min: lo, max: hi, kind: "uint64"}, name, "", def, usage)
}

// floatFlag defines --name, a finite float64 in [lo, hi].
func floatFlag(fs *pflag.FlagSet, p *float64, name string, def, lo, hi float64, usage string) *bounded[float64] {
	return addBounded(fs, &bounded[float64]{p: p, min: lo, max: hi, kind: "float"}, name, "", def, usage)
}

// openFloatFlag defines --name, a float64 in (lo, hi), both ends excluded.
func openFloatFlag(fs *pflag.FlagSet, p *float64, name string, def, lo, hi float64, usage string) *bounded[float64] {
	return addBounded(fs, &bounded[float64]{p: p, min: lo, max: hi, openMin: true, openMax: true, kind: "float"}, name, "", def, usage)
}

// durationFlag defines --name, a duration in [lo, hi].
func durationFlag(fs *pflag.FlagSet, p *time.Duration, name string, def, lo, hi time.Duration, usage string) *bounded[time.Duration] {
	return addBounded(fs, &bounded[time.Duration]{p: p, min: lo, max: hi, kind: "duration"}, name, "", def, usage)
}

func fmtNum(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

var zeroUnits = regexp.MustCompile(`([hm])0s$|(h)0m$`)

// fmtDuration writes d as Go does, without trailing zero units: 24h, 1m30s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	for {
		t := zeroUnits.ReplaceAllString(s, "$1$2")
		if t == s {
			return s
		}
		s = t
	}
}

// maxWorkers bounds the goroutines (or group members) a process runs
// units on; maxBenchProducers and maxBenchBody bound forklab log bench's
// load (as its --loads does).
const (
	maxWorkers        = 4096
	maxBenchProducers = 4096
	maxBenchBody      = 16 << 20
)

// specFlags maps the spec's keys to the flags of forklab sweep that set
// them.
var specFlags = map[string]string{
	"seeds": "seeds", "fork_at": "fork-at", "replicas": "replicas", "unit_seeds": "unit-seeds",
	"agent.parallel": "parallel", "agent.timeout": "timeout", "agent.retries": "retries",
	"max_error_rate": "max-error-rate", "max_cost": "max-cost", "transcripts": "transcripts",
}

// specErr words a refusal of the resolved spec (a sweep.KeyError) with the
// flag that set the key, when a flag did: "--fork-at: step 12 is past …"
// rather than "fork_at: …". flags maps a key to a flag name where it differs
// from specFlags (checkpoint's --seed for seeds); changed says whether the
// user set a flag. The result is bad input.
func specErr(err error, changed func(name string) bool, flags map[string]string) error {
	var ke *sweep.KeyError
	if errors.As(err, &ke) {
		name, ok := flags[ke.Key]
		if !ok {
			name, ok = specFlags[ke.Key]
		}
		if ok && changed(name) {
			return asInput(fmt.Errorf("--%s: %w", name, ke.Err))
		}
	}
	return asInput(err)
}

// maxPID is the largest process id Linux hands out (pid_max's limit,
// 2^22).
const maxPID = 1 << 22

// trimNotFloat is a floattext refusal without its sentinel's words: "1e-400
// is too small for a float64: it would read as 0".
func trimNotFloat(err error) string {
	return strings.TrimSuffix(err.Error(), " ("+floattext.ErrNotFloat64.Error()+")")
}

// dialTimeoutFlag defines --dial-timeout, the same flag in every command
// that dials Kafka (log serve --brokers, log sink, worker, sweep
// --distributed): how long its first contact with the cluster is retried
// before it gives up with exit 1, naming the brokers (internal/kafkadial).
func dialTimeoutFlag(fs *pflag.FlagSet, p *time.Duration, usagePrefix string) {
	durationFlag(fs, p, "dial-timeout", kafkadial.DefaultTimeout, kafkadial.MinTimeout, kafkadial.MaxTimeout,
		usagePrefix+"how long to keep trying to reach Kafka (connect, find or create the topics) before giving up")
}

// retryForFlag defines --retry-for for the commands that run until their
// work is done (worker, sweep --distributed, log sink --follow): how long
// a Kafka cluster may stay out of reach once they are running (a broker
// restarting, a network cut) before they stop with exit 1 and a message
// saying so; rebalances and timeouts meanwhile are retried with backoff
// (internal/kafkadial.Watch).
func retryForFlag(fs *pflag.FlagSet, p *time.Duration, usagePrefix string) {
	durationFlag(fs, p, "retry-for", kafkadial.DefaultRetryFor, kafkadial.MinRetryFor, kafkadial.MaxRetryFor,
		usagePrefix+"how long Kafka may stay out of reach once running (a broker restarting, a network cut) before giving up; retried with backoff meanwhile")
}
