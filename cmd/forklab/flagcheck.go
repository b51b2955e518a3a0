package main

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// emptyAllowed lists the text flags for which an explicitly empty value
// means something: --token "" reads the log without a token, whatever
// $FORKLAB_TOKEN holds.
var emptyAllowed = []string{"token"}

// urlFlagKey annotates a flag whose value is a session log's URL
// (http://host:port): checkFlags refuses any other value before the
// command runs (markURLFlag).
const urlFlagKey = "forklab.url"

// needsKey annotates a flag that only means something beside another
// (report --overwrite beside --html): given alone it would be accepted and
// ignored, so checkFlags refuses it (markNeeds).
const needsKey = "forklab.needs"

// markNeeds marks flag name of fs as meaningful only with one of the flags
// needs.
func markNeeds(fs *pflag.FlagSet, name string, needs ...string) {
	if err := fs.SetAnnotation(name, needsKey, needs); err != nil {
		panic(err)
	}
}

// excludesKey annotates a flag that means nothing beside another (log
// serve --data-dir, for the embedded broker, beside --brokers): given
// together, it would be accepted and ignored, so checkFlags refuses it
// (markExcludes).
const excludesKey = "forklab.excludes"

// markExcludes marks flag name of fs as meaningless beside any of the
// flags others.
func markExcludes(fs *pflag.FlagSet, name string, others ...string) {
	if err := fs.SetAnnotation(name, excludesKey, others); err != nil {
		panic(err)
	}
}

// markURLFlag marks flag name of fs as a session log URL.
func markURLFlag(fs *pflag.FlagSet, name string) {
	if err := fs.SetAnnotation(name, urlFlagKey, []string{"true"}); err != nil {
		panic(err)
	}
}

// checkFlags refuses, before any command runs, a text flag given with an
// empty value (--out "", --spec=, --brokers "$UNSET"). Without it, most
// commands read an empty value as "not given" and quietly do something else
// than asked — a full sweep for --shard "", an in-memory one for --from-log
// "", no page for report --html "", the embedded broker for log serve
// --brokers "" — or fail late with a message that does not name the flag.
// It also refuses a flag that means something only beside another, given
// without it (markNeeds), a flag given beside one that makes it mean
// nothing (markExcludes), and a malformed session log URL (markURLFlag), which would
// otherwise fail on the first request, with Go's parse error, after work
// was done or retried. The error exits 2 (inputError).
func checkFlags(cmd *cobra.Command, _ []string) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		if typ := f.Value.Type(); (typ == "string" || typ == "stringArray") && !slices.Contains(emptyAllowed, f.Name) {
			empty := f.Value.String() == ""
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				empty = slices.Contains(sv.GetSlice(), "")
			}
			switch {
			case !empty:
			case typ == "stringArray":
				err = usageErr("--%s is given an empty value: give each one a value, or leave it out (see '%s --help')", f.Name, cmd.CommandPath())
			case f.DefValue == "":
				err = usageErr("--%s is empty: give a value, or leave the flag out", f.Name)
			default:
				err = usageErr("--%s is empty: give a value, or leave the flag out for its default %q", f.Name, f.DefValue)
			}
			if err != nil {
				return
			}
		}
		if _, ok := f.Annotations[urlFlagKey]; ok {
			if e := checkLogURL(f.Value.String()); e != nil {
				err = usageErr("--%s %q: %v", f.Name, f.Value.String(), e)
				return
			}
		}
		if needs, ok := f.Annotations[needsKey]; ok && !slices.ContainsFunc(needs, cmd.Flags().Changed) {
			err = usageErr("--%s applies only with --%s (see '%s --help')", f.Name, strings.Join(needs, " or --"), cmd.CommandPath())
			return
		}
		for _, other := range f.Annotations[excludesKey] {
			if cmd.Flags().Changed(other) {
				err = usageErr("--%s does not apply with --%s: give one or the other (see '%s --help')", f.Name, other, cmd.CommandPath())
				return
			}
		}
	})
	return err
}

// checkLogURL checks that s is the URL of a session log: http or https, a
// host, no query or fragment (a path, such as the /v1/stream/ that forklab
// log serve prints, is allowed).
func checkLogURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("not a session log URL: want http://HOST:PORT, e.g. http://127.0.0.1:4437 (what forklab log serve prints)")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("a session log URL has no query or fragment: want http://HOST:PORT, e.g. http://127.0.0.1:4437")
	}
	return nil
}

func init() {
	rootCmd.PersistentPreRunE = checkFlags
}
