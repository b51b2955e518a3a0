package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/lab/sweep"
	"github.com/forklab/forklab/pipeline/world"
	"github.com/spf13/pflag"

	// The built-in worlds register themselves with the lab.
	_ "github.com/forklab/forklab/pipeline/worlds/counter"
	_ "github.com/forklab/forklab/pipeline/worlds/toolloop"
)

// worldFlags are the flags that choose a spec's world and set its
// parameters and the model's, shared by sweep and checkpoint. Every
// parameter of every built-in world has a flag of its own (--p-stall for
// p_stall); --param key=value sets any parameter of the chosen world. A
// flag the user set replaces the spec file's value; an unset flag leaves it
// alone.
type worldFlags struct {
	fs          *pflag.FlagSet
	world       string
	params      []string
	byFlag      map[string]string // flag name -> value text
	temperature float64
	noTool      float64
}

// flagName is the flag of parameter name: p_stall -> p-stall.
func flagName(param string) string { return strings.ReplaceAll(param, "_", "-") }

func addWorldFlags(fs *pflag.FlagSet) *worldFlags {
	d := sweep.DefaultSpec()
	f := &worldFlags{fs: fs, byFlag: map[string]string{}}
	fs.StringVar(&f.world, "world", d.World, "the world to play: "+strings.Join(lab.Names(), ", ")+" (forklab worlds describes them)")
	fs.StringArrayVar(&f.params, "param", nil, "set a world parameter, key=value (repeatable; a list as 2,5 or [2,5]; a key given twice must have one value)")
	seen := map[string]bool{}
	for _, def := range lab.Definitions() {
		decl := def.Declaration()
		for _, p := range decl.Params {
			name := flagName(p.Name)
			if seen[name] || fs.Lookup(name) != nil {
				continue
			}
			seen[name] = true
			v := new(string)
			f.byFlag[name] = ""
			fs.Var(&textFlag{v: v, set: func(s string) { f.byFlag[name] = s }}, name,
				fmt.Sprintf("[%s] %s (default %s)", decl.Name, p.Description, defaultText(p)))
		}
	}
	floatFlag(fs, &f.temperature, "temperature", 0, 0, 1, "probability a model turn departs from the greedy choice")
	floatFlag(fs, &f.noTool, "no-tool", d.Model.NoTool, 0, 1, "share of departing turns that call no tool at all")
	return f
}

// textFlag is a flag that keeps its text for the chosen world to parse.
type textFlag struct {
	v   *string
	set func(string)
}

func (t *textFlag) String() string     { return *t.v }
func (t *textFlag) Type() string       { return "value" }
func (t *textFlag) Set(s string) error { *t.v = s; t.set(s); return nil }

func defaultText(p world.Param) string {
	switch v := p.Default.(type) {
	case []int64:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(p.Default)
}

// apply copies the flags the user set into spec: the world, then each
// parameter flag and --param, checked against the world's declaration.
func (f *worldFlags) apply(spec *sweep.Spec) error {
	set := f.fs.Changed
	if set("world") && f.world != spec.World {
		spec.World = f.world
		spec.Params = world.Params{} // another world's parameters do not carry over
	}
	def, err := lab.Lookup(spec.World)
	if err != nil {
		return fmt.Errorf("--world: %w", err)
	}
	return f.applyDecl(spec, def.Declaration(), false)
}

// applyDecl is apply for the world declared by decl (external: an
// agent's, whose parameters have no flags of their own and are set with
// --param only): parameter flags and --param are checked against it. A parameter given
// twice with different values (--target 7 --param target=6, or --param
// twice) is refused naming both flags, and so is a parameter or model
// setting the spec's grid varies (the grid would silently win).
func (f *worldFlags) applyDecl(spec *sweep.Spec, decl world.Declaration, external bool) error {
	set := f.fs.Changed
	if spec.Params == nil {
		spec.Params = world.Params{}
	}
	type given struct {
		flag string // as the user wrote it: --target 7, --param target=6
		v    any
	}
	byParam := map[string]given{}
	give := func(name, flag string, v any) error {
		if g, ok := byParam[name]; ok && !reflect.DeepEqual(g.v, v) {
			return fmt.Errorf("%s and %s both set parameter %s, to different values: give it once", g.flag, flag, name)
		}
		if vs, ok := spec.Grid[name]; ok {
			return fmt.Errorf("%s sets parameter %s, which the spec's grid varies (grid: %s: %s): drop the flag or the grid axis", flag, name, name, sweep.ListText(vs))
		}
		byParam[name] = given{flag, v}
		return nil
	}
	names := make([]string, 0, len(f.byFlag))
	for name := range f.byFlag {
		if set(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		text := f.byFlag[name]
		p, ok := decl.Param(strings.ReplaceAll(name, "-", "_"))
		if !ok {
			if external {
				return fmt.Errorf("--%s is not a parameter of world %s (%s)", name, decl.Name, paramsText(decl))
			}
			return fmt.Errorf("--%s is not a parameter of world %s (%s)", name, decl.Name, flagsText(decl))
		}
		v, err := p.ParseText(text)
		if err != nil {
			return fmt.Errorf("--%s: %w", name, err)
		}
		if err := give(p.Name, fmt.Sprintf("--%s %s", name, text), v); err != nil {
			return err
		}
	}
	for _, kv := range f.params {
		one, err := decl.ParseParamText([]string{kv})
		if err != nil {
			return err
		}
		for k, c := range one {
			if err := give(k, "--param "+kv, c); err != nil {
				return err
			}
		}
	}
	for k, g := range byParam {
		spec.Params[k] = g.v
	}
	for _, m := range []struct{ flag, key string }{{"temperature", "temperature"}, {"no-tool", "no_tool"}} {
		if vs, ok := spec.Grid[m.key]; ok && set(m.flag) {
			return fmt.Errorf("--%s sets the model's %s, which the spec's grid varies (grid: %s: %s): drop the flag or the grid axis", m.flag, m.key, m.key, sweep.ListText(vs))
		}
	}
	if set("temperature") {
		spec.Model.Temperature = f.temperature
	}
	if set("no-tool") {
		spec.Model.NoTool = f.noTool
	}
	return nil
}

// flagsText lists a world's parameter flags for a refusal: "its
// parameters: --a, --b", or "it declares no parameters".
func flagsText(d world.Declaration) string {
	if len(d.Params) == 0 {
		return "it declares no parameters"
	}
	return "its parameters: " + flagList(d)
}

// paramsText lists an external agent's parameters for a refusal, as
// --param, the only way to set them: "its parameters, set with --param
// NAME=VALUE: --param horizon=…, --param mode=…", or "it declares no
// parameters".
func paramsText(d world.Declaration) string {
	if len(d.Params) == 0 {
		return "it declares no parameters"
	}
	names := make([]string, len(d.Params))
	for i, p := range d.Params {
		names[i] = "--param " + p.Name + "=…"
	}
	slices.Sort(names)
	return "its parameters, set with --param NAME=VALUE: " + strings.Join(names, ", ")
}

// changed lists the world flags the user set (--world, --param, a
// parameter flag, --temperature, --no-tool), as --name.
func (f *worldFlags) changed() []string {
	var set []string
	f.fs.Visit(func(fl *pflag.Flag) {
		if _, isParam := f.byFlag[fl.Name]; isParam || fl.Name == "world" || fl.Name == "param" || fl.Name == "temperature" || fl.Name == "no-tool" {
			set = append(set, "--"+fl.Name)
		}
	})
	return set
}

func flagList(d world.Declaration) string {
	names := make([]string, len(d.Params))
	for i, p := range d.Params {
		names[i] = "--" + flagName(p.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
