package main

import "strings"

// A repeatable flag whose items are named (--agent-env KEY=VALUE, --var,
// --setting, --target NAME=URL, --pid NAME=PID, --stream NAME) refuses a
// name given twice, as sweep refuses --arms off,on,on and --fork-at 3,3:
// keeping the last (or the first), or doing the work twice, would change
// the input without a word. --param is the one exception: it is refused
// only when the two values differ (worldFlags.applyDecl), since a world
// parameter set twice to one value is the same sweep.

// onceEach returns a usage error (exit 2) naming the first item of the
// repeatable flag --name whose name (name of item, as nameOf reads it)
// another item already gave. Items nameOf cannot read are left to the
// flag's own parsing.
func onceEach(flag string, items []string, nameOf func(item string) string) error {
	first := map[string]string{}
	for _, it := range items {
		n := nameOf(it)
		if n == "" {
			continue
		}
		if prev, ok := first[n]; ok {
			if prev == it {
				return usageErr("--%s %s is given twice: give it once", flag, it)
			}
			return usageErr("--%s gives %s twice (%s and %s): give it once, with the value you mean", flag, n, prev, it)
		}
		first[n] = it
	}
	return nil
}

// keyOf is the NAME of a NAME=VALUE item, white space trimmed ("" for an
// item without =).
func keyOf(item string) string {
	k, _, ok := strings.Cut(item, "=")
	if !ok {
		return ""
	}
	return strings.TrimSpace(k)
}

// itself is the item as its own name (--stream NAME).
func itself(item string) string { return item }

// envMap reads --agent-env KEY=VALUE items into a map, refusing an item
// that is not KEY=VALUE and a KEY given twice.
func envMap(items []string) (map[string]string, error) {
	rawKey := func(kv string) string { k, _, _ := strings.Cut(kv, "="); return k }
	if err := onceEach("agent-env", items, rawKey); err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range items {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErr("--agent-env %q: want KEY=VALUE", kv)
		}
		env[k] = v
	}
	return env, nil
}
