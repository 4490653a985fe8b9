package reports

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// The HTML report: one self-contained page per run (its charts inline as
// SVG, its style and script inline, nothing fetched) and an index of every
// run. Every value from a result goes through html/template, so a
// Deployment named "<img src=x onerror=alert(1)>" is text.

//go:embed assets
var assets embed.FS

var pages = template.Must(template.New("pages").Funcs(template.FuncMap{
	"upper": strings.ToUpper,
	// count is n, or "n/a" for a counter the controller does not expose.
	"count": func(n int64) string {
		if n < 0 {
			return "n/a"
		}
		return fmt.Sprint(n)
	},
	"join":    strings.Join,
	"secs":    secs,
	"seconds": seconds,
	"dur": func(d any) string {
		switch v := d.(type) {
		case Duration:
			return time.Duration(v).Round(time.Millisecond).String()
		case time.Duration:
			return v.Round(time.Millisecond).String()
		}
		return fmt.Sprint(d)
	},
	"laneColor": func(i int) template.CSS {
		c := laneColor(i, 0xff)
		return template.CSS(fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B))
	},
	"css": func() template.CSS { return template.CSS(asset("assets/style.css")) },
	"js":  func() template.JS { return template.JS(asset("assets/report.js")) },
}).ParseFS(assets, "assets/*.tmpl"))

func asset(name string) string {
	b, err := assets.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time
	}
	return string(b)
}

// Version is written into generated pages; the CLI sets it.
var Version = "(devel)"

// RunPageName is where a run's page goes in a report folder.
func RunPageName(r *Result) string {
	return filepath.Join("runs", strings.TrimSuffix(r.FileName(), ".json")+".html")
}

// RenderRun writes r's page. indexLink, when not empty, is the link back to
// the index.
func RenderRun(w io.Writer, r *Result, indexLink string) error {
	p := buildRunPage(r)
	c, err := overview(r, p)
	if err != nil {
		return err
	}
	p.Chart = c
	data := struct {
		*runPage
		IndexLink string
		First     *breakView
	}{runPage: p, IndexLink: indexLink}
	p.Generated = Version
	if len(p.Breaks) > 0 {
		data.First = &p.Breaks[0]
	}
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, "run.html.tmpl", data); err != nil {
		return fmt.Errorf("reports: rendering %s: %w", r.FileName(), err)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// RenderIndex writes the index of results; link gives each run's page.
// extra, when not empty, is a section shown above the runs (trusted HTML
// built by the caller with html/template).
func RenderIndex(w io.Writer, results []*Result, link func(*Result) string, extra template.HTML) error {
	rows := buildIndex(results, link)
	data := struct {
		Rows            []indexRow
		Passed, Failed  int
		Faults          int
		Simulated, Wall time.Duration
		Extra           template.HTML
		Generated       string
	}{Rows: rows, Extra: extra, Generated: Version}
	for _, r := range rows {
		switch r.Status {
		case "pass", "skipped":
			data.Passed++
		default:
			data.Failed++
		}
		data.Faults += r.R.Counters.Faults
		data.Simulated += time.Duration(r.R.Simulated)
		data.Wall += time.Duration(r.R.Wall)
	}
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, "index.html.tmpl", data); err != nil {
		return fmt.Errorf("reports: rendering the index: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteHTML writes the report of results into dir: index.html and one page
// per run under runs/. It returns the index's path. A run whose page could
// not be rendered is named in the error; the others are written. The run
// pages are rendered side by side, one per CPU: a campaign's hundreds of
// pages otherwise take seconds one after another.
func WriteHTML(dir string, results []*Result, extra template.HTML) (string, error) {
	err := WritePages(dir, results)
	index, indexErr := WriteIndex(dir, results, extra)
	return index, errors.Join(err, indexErr)
}

// WritePages writes the page of each of results into dir, under runs/
// (RunPageName), side by side, one per CPU. A run whose page could not be
// rendered is named in the error; the others are written.
func WritePages(dir string, results []*Result) error {
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
		return err
	}
	errs := make([]error, len(results)) // by run, so the error reads in order
	var workers errgroup.Group
	workers.SetLimit(runtime.GOMAXPROCS(0))
	for i, r := range results {
		workers.Go(func() error {
			errs[i] = WritePage(dir, r)
			return nil
		})
	}
	_ = workers.Wait() // each run's error is in errs
	return errors.Join(errs...)
}

// WritePage writes r's page into dir, under runs/ (RunPageName), linked
// back to dir's index.html: what a process that ran r can do at once, so
// that a report of many runs only reads their summaries (ReadSummary)
// and writes its index (WriteIndex).
func WritePage(dir string, r *Result) error {
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := RenderRun(&buf, r, "../index.html"); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, RunPageName(r)), buf.Bytes())
}

// WriteIndex writes dir's index.html: results, each linked to its page
// (RunPageName), under extra. Only what ReadSummary reads of a result is
// used. It returns the index's path.
func WriteIndex(dir string, results []*Result, extra template.HTML) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := RenderIndex(&buf, results, func(r *Result) string { return filepath.ToSlash(RunPageName(r)) }, extra); err != nil {
		return "", err
	}
	index := filepath.Join(dir, "index.html")
	return index, writeFile(index, buf.Bytes())
}

// writeFile writes data to path through a temporary file, so a reader
// never sees half a page.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".page-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
