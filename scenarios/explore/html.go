package explore

import (
	"bytes"
	"errors"
	"html/template"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/converge-lab/converge/reports"
)

var page = template.Must(template.New("exploration").Funcs(template.FuncMap{
	"dur":  func(d reports.Duration) string { return time.Duration(d).Round(time.Millisecond).String() },
	"inc":  func(i int) int { return i + 1 },
	"join": func(s []string) string { return strings.Join(s, ", ") },
}).Parse(`<section class="exploration">
<h2>Exploration of {{.E.Scenario}} ({{.E.Controller}}, seed {{.E.Seed}})</h2>
<p>{{len .E.Findings}} findings. References: seeds {{range $i, $s := .E.References}}{{if $i}}, {{end}}{{$s}}{{end}} (in fours: two as written, two with the controller starting late; more when they disagreed). {{dur .E.Wall}} in all.</p>
<h3>Coverage</h3>
<table>
<tr><th>step</th><th>points before</th><th>after</th></tr>
<tr><td>found: {{range $c, $n := .E.Coverage.Found}}{{$c}} {{$n}}; {{end}}</td><td></td><td>{{.Found}}</td></tr>
{{range .E.Coverage.Steps}}<tr><td>pruned: {{.Name}}</td><td>{{.Before}}</td><td>{{.After}}</td></tr>
{{end}}<tr><td>run</td><td></td><td>{{.E.Coverage.Run}} ({{.E.Coverage.Unfired}} did not fire, {{.E.Coverage.Errors}} could not be carried out)</td></tr>
</table>
<h3>Findings</h3>
{{if not .E.Findings}}<p>None: every run ended as the references did.</p>{{else}}
<table>
<tr><th>#</th><th>oracle</th><th>what</th><th>points</th><th>smallest</th><th>detail</th><th>replay</th></tr>
{{range $i, $f := .E.Findings}}<tr>
<td>{{inc $i}}</td><td>{{$f.Oracle}}</td><td>{{$f.Kind}} {{$f.Field}}</td><td>{{len $f.Points}}</td>
<td>{{with index $.Links $i}}<a href="{{.}}">{{end}}{{$f.Smallest.Point.ID}}{{with index $.Links $i}}</a>{{end}}: {{$f.Smallest.Point.Class}}, {{$f.Smallest.Point.Signature}} (in the reference at {{dur $f.Smallest.Point.At}}: {{$f.Smallest.Point.About}})</td>
<td><pre>{{$f.Detail}}</pre></td><td><code>{{$f.Smallest.Replay}}</code></td>
</tr>
{{end}}</table>{{end}}
<h3>Masks</h3>
<p>Static keys: {{join .E.Masks.Keys}}. Learned from the references: {{if .E.Learned.Paths}}{{join .E.Learned.Paths}}{{else}}none{{end}}. Not judged, as the references disagreed on them: objects {{if .E.Noise.Exists}}{{join .E.Noise.Exists}}{{else}}none{{end}}; name families {{if .E.Noise.Families}}{{join .E.Noise.Families}}{{else}}none{{end}}; counts of {{if .E.Noise.Counts}}{{join .E.Noise.Counts}}{{else}}none{{end}}.</p>
</section>`))

// HTML is the exploration's section of a report: coverage, findings (each
// linked to the run page of its smallest point) and masks.
func (e *Exploration) HTML() (template.HTML, error) {
	found := 0
	for _, n := range e.Coverage.Found {
		found += n
	}
	var links []string
	for _, f := range e.Findings {
		link := ""
		if f.Smallest.Result != "" {
			link = filepath.ToSlash(filepath.Join("runs", strings.TrimSuffix(f.Smallest.Result, ".json")+".html"))
		}
		links = append(links, link)
	}
	var b bytes.Buffer
	err := page.Execute(&b, struct {
		E     *Exploration
		Found int
		Links []string
	}{e, found, links})
	return template.HTML(b.String()), err
}

// WriteReport writes the HTML report of e into dir, where its runs'
// results are: the exploration's section above every run, each run with
// its page, the smallest point a failing one shrank to included (a
// finding links to it). A run whose page its process wrote (Outcome.Page)
// is only summarised for the index. It returns the index's path.
func WriteReport(dir string, e *Exploration) (string, error) {
	return WriteReportFrom(dir, e, nil)
}

// WriteReportFrom is WriteReport given summaries of runs whose pages are
// written (reports.WriteSummaries), by result file name: the run of an
// outcome with its page and its summary there is not read at all.
func WriteReportFrom(dir string, e *Exploration, summaries map[string]*reports.Result) (string, error) {
	type run struct {
		file    string
		paged   bool
		summary *reports.Result
	}
	var runs []run
	seen := map[string]bool{}
	add := func(o *Outcome) {
		if o != nil && o.Result != "" && !seen[o.Result] {
			seen[o.Result] = true
			r := run{file: filepath.Join(dir, o.Result), paged: o.Page}
			if o.Page {
				r.summary = summaries[o.Result]
			}
			runs = append(runs, r)
		}
	}
	for _, o := range slices.Concat(e.Outcomes, e.ReferenceOutcomes) {
		add(&o)
		add(o.Shrunk)
	}
	// Read a core's worth at a time, kept in order: the report waits on
	// them.
	read := make([]*reports.Result, len(runs))
	var readers errgroup.Group
	readers.SetLimit(runtime.GOMAXPROCS(0))
	for i, r := range runs {
		if r.summary != nil {
			read[i] = r.summary
			continue
		}
		readers.Go(func() error {
			// One unreadable is left out.
			if r.paged {
				read[i], _ = reports.ReadSummary(r.file)
			} else {
				read[i], _ = reports.Read(r.file)
			}
			return nil
		})
	}
	_ = readers.Wait()
	var results, unpaged []*reports.Result
	for i, r := range read {
		if r == nil {
			continue
		}
		results = append(results, r)
		if !runs[i].paged {
			unpaged = append(unpaged, r)
		}
	}
	extra, err := e.HTML()
	if err != nil {
		return "", err
	}
	pagesErr := reports.WritePages(dir, unpaged)
	index, err := reports.WriteIndex(dir, results, extra)
	return index, errors.Join(pagesErr, err)
}
