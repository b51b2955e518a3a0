package queries

import (
	"strings"
	"testing"
)

// Every macro of stats.sql is in the help's table with its arguments
// (issue 26: the macros' arguments were documented only inside stats.sql).
func TestMacrosHelpNamesEveryMacro(t *testing.T) {
	ms := Macros()
	if len(ms) != 9 || ms[0] != (Macro{"z95", ""}) || ms[3] != (Macro{"mcnemar_p", "b, c"}) {
		t.Fatalf("macros %v", ms)
	}
	help := MacrosHelp()
	for _, m := range ms {
		// A pair is written "newcombe_lo(a, b, c, d), _hi": the second
		// by its suffix after the first's arguments.
		full := m.Name + "(" + m.Args + ")"
		short := "_" + m.Name[strings.LastIndex(m.Name, "_")+1:]
		if !strings.Contains(help, full) && !(strings.Contains(help, ", "+short) || strings.Contains(help, ", "+m.Name)) {
			t.Errorf("%s is not in the help:\n%s", full, help)
		}
	}
	if !strings.Contains(help, "mcnemar_p(b, c)                McNemar's exact two-sided p-value") {
		t.Errorf("help:\n%s", help)
	}
}
