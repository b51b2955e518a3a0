package gate

import (
	"encoding/xml"
	"fmt"
	"io"
)

// JUnit XML, the report format CI systems read test results in (GitHub
// Actions through a reporter action, GitLab's artifacts:reports:junit,
// Jenkins' junit step): one testsuite for the gate, one testcase per arm,
// configuration, fork step and condition, a failure element with the
// numbers for each condition that fails. The element and attribute names
// are those of the common schema (testsuites, testsuite with tests and
// failures, testcase with classname and name, failure with message and
// type, and its text).

type junitSuites struct {
	XMLName  xml.Name   `xml:"testsuites"`
	Name     string     `xml:"name,attr"`
	Tests    int        `xml:"tests,attr"`
	Failures int        `xml:"failures,attr"`
	Suites   []junitRun `xml:"testsuite"`
}

type junitRun struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	ClassName string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Output    string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the checks of the gate on the sweep in dir as JUnit
// XML: test case classname forklab.gate.ARM, name "fork step 3: harm rate
// <= 5%" (with the configuration when the sweep has several), a failure
// whose message is the comparison and whose text holds the counts and the
// interval behind it; a passing case keeps them in system-out.
func WriteJUnit(w io.Writer, dir string, checks []Check, configs bool) error {
	run := junitRun{Name: "forklab gate " + dir, Tests: len(checks)}
	for _, c := range checks {
		where := fmt.Sprintf("fork step %d", c.ForkStep)
		if configs {
			where = fmt.Sprintf("config %d · %s", c.ConfigID, where)
		}
		tc := junitCase{ClassName: "forklab.gate." + c.Arm, Name: fmt.Sprintf("%s: %s %s %s (--%s)", where, c.What, c.Op, c.format(c.Threshold, false), c.Flag), Time: "0"}
		if c.Pass {
			tc.Output = c.Condition() + "\n" + c.Detail
		} else {
			run.Failures++
			tc.Failure = &junitFailure{Message: c.Condition(), Type: "threshold", Text: c.Where(configs) + ": " + c.Detail}
		}
		run.Cases = append(run.Cases, tc)
	}
	doc := junitSuites{Name: "forklab gate", Tests: run.Tests, Failures: run.Failures, Suites: []junitRun{run}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
