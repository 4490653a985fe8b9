package explore_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios/explore"
)

// Every run the report links to has its page: the points', the
// references', and the smallest point a failing one shrank to, which its
// finding links to; a page its process wrote is kept as it is.
func TestEveryLinkOfTheReportHasItsPage(t *testing.T) {
	dir := t.TempDir()
	result := func(name string) string {
		path, err := reports.Write(dir, &reports.Result{Schema: reports.SchemaVersion, Scenario: name, Backend: "fake", Seed: 1, Pass: name != "w-i001-round"})
		require.NoError(t, err)
		return filepath.Base(path)
	}
	paged := result("w-i002-round")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "runs"), 0o755))
	written := filepath.Join(dir, "runs", "w-i002-round_fake_1.html")
	require.NoError(t, os.WriteFile(written, []byte("written by the point's process"), 0o644))
	shrunk := explore.Outcome{Point: explore.Point{ID: "i001-s1", Class: explore.Input}, Result: result("w-i001-s1-round"),
		Differences: []explore.Difference{{Oracle: explore.OracleVerdict, Kind: "invariant", Field: "x", Detail: "broken"}}}
	failing := explore.Outcome{Point: explore.Point{ID: "i001", Class: explore.Input}, Result: result("w-i001-round"), Shrunk: &shrunk,
		Differences: shrunk.Differences}
	e := &explore.Exploration{
		Scenario: "w", Controller: "c", Backend: "fake", Seed: 1,
		Outcomes:          []explore.Outcome{failing, {Point: explore.Point{ID: "i002"}, Result: paged, Page: true}},
		ReferenceOutcomes: []explore.Outcome{{Result: result("w")}},
		Findings:          []explore.Finding{{Oracle: explore.OracleVerdict, Detail: "broken", Smallest: shrunk, Points: []string{"i001"}}},
	}
	index, err := explore.WriteReport(dir, e)
	require.NoError(t, err)
	html, err := os.ReadFile(index)
	require.NoError(t, err)
	links := regexp.MustCompile(`href="(runs/[^"]+)"`).FindAllStringSubmatch(string(html), -1)
	assert.Len(t, links, 5, "each run's row, and the finding's smallest point")
	for _, l := range links {
		assert.FileExists(t, filepath.Join(dir, l[1]))
	}
	assert.Contains(t, string(html), `href="runs/w-i001-s1-round_fake_1.html"`)
	page, err := os.ReadFile(written)
	require.NoError(t, err)
	assert.Equal(t, "written by the point's process", string(page), "a written page is not rendered again")
}

// A run whose page is written and whose summary the report is given is
// not read: its file is not even there, the index lists it from the
// summary, and its page is left as it was.
func TestTheReportReadsNoRunItHasTheSummaryOf(t *testing.T) {
	dir := t.TempDir()
	sum := &reports.Result{Schema: reports.SchemaVersion, Scenario: "w-i001-round", Backend: "fake", Seed: 1, Pass: true}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "runs"), 0o755))
	page := filepath.Join(dir, reports.RunPageName(sum))
	require.NoError(t, os.WriteFile(page, []byte("written by the point's process"), 0o644))
	ref, err := reports.Write(dir, &reports.Result{Schema: reports.SchemaVersion, Scenario: "w", Backend: "fake", Seed: 1, Pass: true})
	require.NoError(t, err)
	e := &explore.Exploration{
		Scenario: "w", Controller: "c", Backend: "fake", Seed: 1,
		Outcomes:          []explore.Outcome{{Point: explore.Point{ID: "i001", Class: explore.Input}, Result: sum.FileName(), Page: true}},
		ReferenceOutcomes: []explore.Outcome{{Result: filepath.Base(ref)}},
	}
	index, err := explore.WriteReportFrom(dir, e, map[string]*reports.Result{sum.FileName(): sum})
	require.NoError(t, err)
	html, err := os.ReadFile(index)
	require.NoError(t, err)
	assert.Contains(t, string(html), `href="runs/w-i001-round_fake_1.html"`)
	assert.Contains(t, string(html), `href="runs/w_fake_1.html"`)
	assert.FileExists(t, filepath.Join(dir, "runs", "w_fake_1.html"), "the reference without a summary is read and rendered")
	got, err := os.ReadFile(page)
	require.NoError(t, err)
	assert.Equal(t, "written by the point's process", string(got))

	// Without the summary, the run's file is read: missing, the run is
	// left out of the index.
	index, err = explore.WriteReportFrom(dir, e, nil)
	require.NoError(t, err)
	html, err = os.ReadFile(index)
	require.NoError(t, err)
	assert.NotContains(t, string(html), `href="runs/w-i001-round_fake_1.html"`)
	assert.Contains(t, string(html), `href="runs/w_fake_1.html"`)
}
