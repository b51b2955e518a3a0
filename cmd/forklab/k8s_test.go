package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// k8sDocs reads the documents of a multi-document YAML file, by kind and
// name.
func k8sDocs(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs := map[string]map[string]any{}
	d := yaml.NewDecoder(f)
	for {
		var doc map[string]any
		if err := d.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		md, _ := doc["metadata"].(map[string]any)
		docs[fmt.Sprint(doc["kind"], "/", md["name"])] = doc
	}
	return docs
}

// dig walks a YAML tree by map keys and list indexes.
func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a mapping at %q", path, k)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no item %d", path, k)
			}
			v = l[k]
		}
	}
	return v
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// deploy/k8s/sweep-job.yaml does what docs/scale-out.md says: an Indexed
// Job whose pods run share $(JOB_COMPLETION_INDEX)/N of the ConfigMap's
// spec with completions = parallelism = N, and a finishing Job that waits
// and publishes. Its commands, run as the pods would (the index
// substituted, the volume a temporary directory, the spec's seeds made
// small), give the single-process sweep byte for byte.
func TestK8sSweepJob(t *testing.T) {
	docs := k8sDocs(t, "../../deploy/k8s/sweep-job.yaml")
	cm, job, fin := docs["ConfigMap/forklab-sweep-spec"], docs["Job/forklab-sweep"], docs["Job/forklab-sweep-finalize"]
	if cm == nil || job == nil || fin == nil {
		t.Fatalf("documents %v", docs)
	}
	if dig(t, job, "apiVersion") != "batch/v1" || dig(t, job, "spec", "completionMode") != "Indexed" {
		t.Fatal("forklab-sweep is not an Indexed batch/v1 Job")
	}
	n, _ := dig(t, job, "spec", "completions").(int)
	if p, _ := dig(t, job, "spec", "parallelism").(int); n < 2 || p != n {
		t.Fatalf("completions %d, parallelism %d", n, p)
	}
	args := strs(dig(t, job, "spec", "template", "spec", "containers", 0, "args"))
	shard := fmt.Sprintf("--shard=$(JOB_COMPLETION_INDEX)/%d", n)
	if args[0] != "forklab" || !strings.Contains(strings.Join(args, " "), shard) {
		t.Fatalf("share args %q lack %s", args, shard)
	}
	finArgs := strs(dig(t, fin, "spec", "template", "spec", "containers", 0, "args"))

	// The pods' file system: the spec from the ConfigMap (seeds made
	// small), the shared volume a temporary directory.
	root := t.TempDir()
	spec := dig(t, cm, "data", "spec.yaml").(string)
	var sm map[string]any
	if err := yaml.Unmarshal([]byte(spec), &sm); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, "spec"), 0o755)
	local := func(a string) string {
		a = strings.ReplaceAll(a, "/spec/", filepath.Join(root, "spec")+"/")
		return strings.ReplaceAll(a, "/data/", filepath.Join(root, "data")+"/")
	}
	out := ""
	for _, a := range finArgs {
		if strings.HasPrefix(a, "/data/") {
			out = local(a)
		}
	}
	// Applied once, then again over the published sweep with another spec
	// and --overwrite on both Jobs, as the file's header says.
	for _, run := range []struct {
		seeds string
		extra []string
	}{{"0:20000", nil}, {"0:12000", []string{"--overwrite"}}} {
		sm["seeds"] = run.seeds
		b, _ := yaml.Marshal(sm)
		os.WriteFile(filepath.Join(root, "spec", "spec.yaml"), b, 0o644)
		// The finishing Job starts first and waits for the shares.
		finCmd := exec.Command(forklabBin)
		for _, a := range finArgs[1:] {
			finCmd.Args = append(finCmd.Args, local(a))
		}
		finCmd.Args = append(append(finCmd.Args, run.extra...), "-q", "--poll=200ms")
		finCmd.Stderr = os.Stderr
		if err := finCmd.Start(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			var pod []string
			for _, a := range args[1:] {
				pod = append(pod, local(strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i))))
			}
			mustRun(t, append(pod, run.extra...)...)
		}
		if err := finCmd.Wait(); err != nil {
			t.Fatalf("finalize %q: %v", finCmd.Args, err)
		}
		single := filepath.Join(t.TempDir(), "single")
		mustRun(t, "sweep", "--spec", filepath.Join(root, "spec", "spec.yaml"), "--out", single, "-q")
		sameSweep(t, single, out, false)
	}
}
