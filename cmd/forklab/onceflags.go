package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// repeatableKey annotates a flag that may be given more than once although
// its value is not a list (markRepeatable). Slice and array flags (--param,
// --agent-env, --var, …) and counters are repeatable without it.
const repeatableKey = "forklab.repeatable"

// markRepeatable marks flag name of fs as one that may be given more than
// once.
func markRepeatable(fs *pflag.FlagSet, name string) {
	if err := fs.SetAnnotation(name, repeatableKey, []string{"true"}); err != nil {
		panic(err)
	}
}

// repeatedFlagError is what a single-value flag given a second, different
// value on the command line fails with.
type repeatedFlagError struct {
	name          string
	first, second string
	times         int
}

func (e *repeatedFlagError) Error() string {
	times := "twice"
	if e.times > 2 {
		times = "more than once"
	}
	return fmt.Sprintf("--%s given %s (%s, then %s): give it once", e.name, times, e.first, e.second)
}

// onceValue wraps the value of a flag that takes one value. pflag keeps the
// last of --seeds 0:10 --seeds 0:20 without a word, so a flag repeated in a
// script, or by an alias and an argument, would silently do something else
// than one of the two asked; onceValue refuses a second, different value
// instead. The same value given again (-q -q, --out d --out d) asks for the
// same thing and is accepted. Only the command line sets flags (a --spec
// file fills the spec, not the flags), so only command-line repeats count.
type onceValue struct {
	pflag.Value
	name  string
	first string
	times int
}

// Set applies the first value given; a later one must be the same.
func (v *onceValue) Set(s string) error {
	v.times++
	if v.times == 1 {
		v.first = s
		return v.Value.Set(s)
	}
	if s != v.first {
		return &repeatedFlagError{name: v.name, first: v.first, second: s, times: v.times}
	}
	return nil
}

// onceBool is an onceValue around a bool flag's value: pflag tells a bool
// flag (one given without a value, -q) by this method, in its help text too.
type onceBool struct{ *onceValue }

// IsBoolFlag reports that the flag is a bool one.
func (onceBool) IsBoolFlag() bool { return true }

// repeatable reports whether flag f may be given more than once: a list
// (pflag.SliceValue: StringArray, StringSlice, …), a counter or a map, or
// one marked with markRepeatable.
func repeatable(f *pflag.Flag) bool {
	if _, ok := f.Value.(pflag.SliceValue); ok {
		return true
	}
	switch f.Value.Type() {
	case "count", "stringToString", "stringToInt", "stringToInt64":
		return true
	}
	_, ok := f.Annotations[repeatableKey]
	return ok
}

// refuseRepeats wraps every single-value flag of c and its subcommands in
// an onceValue, so that each command refuses such a flag given twice with
// different values (exit 2, naming the flag and both values, in one line
// of its own) before it runs, whatever the command's own flag error
// function says of other errors. It is called once, after every command
// registered itself and before the command line is parsed.
func refuseRepeats(c *cobra.Command) {
	own := c.FlagErrorFunc()
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if r, ok := repeatedFlag(err); ok {
			return usageErr("%v", r)
		}
		return own(c, err)
	})
	refuseOnce(c.Flags())
	refuseOnce(c.PersistentFlags())
	for _, s := range c.Commands() {
		refuseRepeats(s)
	}
}

// refuseOnce wraps every single-value flag of fs in an onceValue (once).
func refuseOnce(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		switch f.Value.(type) {
		case *onceValue, onceBool:
			return
		}
		if repeatable(f) {
			return
		}
		v := &onceValue{Value: f.Value, name: f.Name}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			f.Value = onceBool{v}
			return
		}
		f.Value = v
	})
}

// repeatedFlag returns the repeatedFlagError inside a flag parse error.
func repeatedFlag(err error) (*repeatedFlagError, bool) {
	var r *repeatedFlagError
	ok := errors.As(err, &r)
	return r, ok
}
