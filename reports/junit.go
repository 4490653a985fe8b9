package reports

import (
	"github.com/converge-lab/converge/internal/text"

	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// JUnit XML, as Jenkins, GitLab and GitHub's test reporters read it.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     float64      `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     float64     `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",chardata"`
}

// NotRun is a scenario an invocation asked for on a backend it does not
// run on: no run, no result, but a skipped case with its reason.
type NotRun struct {
	Scenario, Backend, Why string
}

// WriteJUnit writes one test case per result (scenario/backend/seed), in a
// suite per backend; a failed verdict is a failure with its reasons, a run
// that could not be carried out an error, one whose fault profile does not
// apply to the controller skipped (Result.Skipped), and each of notRun a
// skipped case (scenario/backend) with its reason.
func WriteJUnit(w io.Writer, results []*Result, notRun ...NotRun) error {
	var out junitSuites
	suites := map[string]int{}
	suite := func(backend string) *junitSuite {
		i, ok := suites[backend]
		if !ok {
			i = len(out.Suites)
			suites[backend] = i
			out.Suites = append(out.Suites, junitSuite{Name: "converge/" + backend})
		}
		return &out.Suites[i]
	}
	for _, n := range notRun {
		s := suite(n.Backend)
		s.Cases = append(s.Cases, junitCase{Name: n.Scenario + "/" + n.Backend, Classname: "converge." + n.Backend,
			Skipped: &junitMessage{Message: n.Why, Type: "skipped"}})
		s.Tests++
		s.Skipped++
	}
	for _, r := range results {
		s := suite(r.Backend)
		c := junitCase{
			Name:      fmt.Sprintf("%s/%s/seed-%d", r.Scenario, r.Backend, r.Seed),
			Classname: "converge." + r.Backend,
			Time:      time.Duration(r.Wall).Seconds(),
			SystemOut: "replay: " + r.Replay,
		}
		switch {
		case r.Error != "":
			c.Error = &junitMessage{Message: text.FirstLine(r.Error), Type: "error", Body: r.Error}
			s.Errors++
		case !r.Pass:
			c.Failure = &junitMessage{Message: text.FirstLine(strings.Join(r.Reasons, "; ")), Type: "verdict",
				Body: strings.Join(slices.Concat(r.Reasons, r.Notes), "\n") + "\n\nreplay: " + r.Replay}
			s.Failures++
		case r.Skipped() != "":
			c.Skipped = &junitMessage{Message: r.Skipped(), Type: "skipped"}
			s.Skipped++
		}
		s.Tests++
		s.Time += c.Time
		s.Cases = append(s.Cases, c)
	}
	for _, s := range out.Suites {
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Skipped += s.Skipped
		out.Time += s.Time
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("reports: junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}
