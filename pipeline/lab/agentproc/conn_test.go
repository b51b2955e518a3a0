package agentproc

import (
	"io"
	"testing"

	"github.com/forklab/forklab/pipeline/world"
)

// A command line that is one simple command is exec'd by /bin/sh, so that
// the agent is forklab's direct child and error messages give its pid;
// anything the shell must interpret itself is left to the shell.
func TestExecLine(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"python3 agent.py --x 1", "exec python3 agent.py --x 1"},
		{"  sh agent.sh", "  exec sh agent.sh"},
		{"FOO=1 BAR=x/y sh agent.sh", "FOO=1 BAR=x/y exec sh agent.sh"},
		{`"/bin/sh" -c true`, `exec "/bin/sh" -c true`},
		{"/bin/sh agent.sh 2>/dev/null", "exec /bin/sh agent.sh 2>/dev/null"},
		{"cd dir && python3 agent.py", ""},
		{"python3 -c 'import x; x.run()'", ""},
		{"sh a.sh | tee log", ""},
		{"sh $(which agent)", ""},
		{"exit 3", ""},
		{"exec sh agent.sh", ""},
		{"{ sh agent.sh; }", ""},
		{"$AGENT --serve", ""},
		{`FOO="a b" sh agent.sh`, ""},
		{"no_such_program_forklab_xyz", ""},
		{"read x\nsh agent.sh", ""},
	} {
		got, direct := execLine(tc.line)
		want := tc.want
		if want == "" {
			want = tc.line
		}
		if got != want || direct != (tc.want != "") {
			t.Errorf("execLine(%q) = %q, %t; want %q, %t", tc.line, got, direct, want, tc.want != "")
		}
	}
}

// Two processes' declarations are compared field by field, and the first
// difference is named with both values, the first process's first.
func TestDeclarationDiff(t *testing.T) {
	first := &InitializeResult{ProtocolVersion: Version, World: testDecl, Capabilities: Capabilities{Batch: 64}}
	for _, tc := range []struct {
		name string
		edit func(r *InitializeResult)
		want string
	}{
		{"same", func(r *InitializeResult) {}, ""},
		{"version", func(r *InitializeResult) { r.World.Version = "1.1" }, `world.version: "1" vs "1.1"`},
		{"batch", func(r *InitializeResult) { r.Capabilities.Batch = 0 }, `capabilities.batch: 64 vs nothing`},
		{"fold", func(r *InitializeResult) { r.Capabilities.Fold = true }, `capabilities.fold: nothing vs true`},
		{"feature renamed", func(r *InitializeResult) {
			r.World.Features = append([]world.Field{}, r.World.Features...)
			r.World.Features[1].Name = "moods"
		}, `world.features[1].name: "mood" vs "moods"`},
		{"feature dropped", func(r *InitializeResult) { r.World.Features = r.World.Features[:2] }, `world.features: 3 entries vs 2 entries`},
		{"agent info differs: allowed", func(r *InitializeResult) { r.Agent = &AgentInfo{Name: "other"} }, ""},
	} {
		now := *first
		tc.edit(&now)
		d := declarationDiff(first, &now)
		if got := map[bool]string{true: d.String(), false: ""}[d.path != ""]; got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestLastLinesBeforeExitAreRead: an agent that writes its last replies and
// exits at once loses none of them. With exec.Cmd's StdoutPipe, Wait closed
// the read end as soon as the process exited, and the lines still in the
// pipe were lost (agent check then saw a shutdown reply go missing under
// load). The script writes more than a pipe holds, so its last writes are
// still unread when it exits.
func TestLastLinesBeforeExitAreRead(t *testing.T) {
	for range 5 {
		k, err := start(Command{Line: "seq 1 40000"}, "agent process 1", nil, false)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		var last string
		for l := range k.lines {
			if l.err != nil {
				if l.err != io.EOF {
					t.Fatalf("after %d lines: %v", n, l.err)
				}
				break
			}
			n++
			last = string(l.line)
		}
		<-k.exited
		if n != 40000 || last != "40000" {
			t.Fatalf("read %d lines, the last %q; want 40000, the last \"40000\"", n, last)
		}
	}
}
