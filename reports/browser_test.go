package reports_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/reports"
	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scaler"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest/tier"
)

func TestMain(m *testing.M) {
	scenarios.PrepareProcess()
	os.Exit(m.Run())
}

// chromium finds Debian's Chromium. Under CI a missing browser fails the
// test; elsewhere it is skipped, saying so.
func chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CONVERGE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed: .ci/run installs Debian's chromium package")
	}
	t.Skip("SKIPPED (browser): chromium is not installed; apt-get install chromium, or set CONVERGE_CHROMIUM")
	return ""
}

// browser is a headless Chromium with a fresh profile and no background
// networking, and what it reported: console errors, uncaught exceptions,
// failed loads and dialogs (an alert means markup from a result ran).
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
	dialogs  []string
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	dialogs := make(chan struct{}, 16)
	err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *cdpruntime.EventConsoleAPICalled:
			if ev.Type == cdpruntime.ConsoleAPICalledTypeError || ev.Type == cdpruntime.ConsoleAPICalledTypeAssert {
				b.problems = append(b.problems, "console."+string(ev.Type)+": "+args(ev.Args))
			}
		case *cdpruntime.EventExceptionThrown:
			b.problems = append(b.problems, (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				b.problems = append(b.problems, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		case *page.EventJavascriptDialogOpening:
			b.dialogs = append(b.dialogs, ev.Message)
			select {
			case dialogs <- struct{}{}:
			default:
			}
		}
	})
	require.NoError(t, err)
	// A dialog blocks the page until it is closed; close each from outside
	// the event loop.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-dialogs:
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}
		}
	}()
	_, err = chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
	require.NoError(t, err)
	return b
}

func args(as []*cdpruntime.RemoteObject) string {
	var s []string
	for _, a := range as {
		s = append(s, string(a.Value)+a.Description)
	}
	return strings.Join(s, " ")
}

func (b *browser) reported() (problems, dialogs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...), append([]string(nil), b.dialogs...)
}

// downscaler is a controller with a classic bug: it "corrects" every
// labelled Deployment down by one replica each second. The scenario's
// first fault refuses its first list, and the scale-down that follows
// breaks never-scales-down.
type downscaler struct{}

func (downscaler) Name() string { return "downscaler" }

// Judge is the scaler's: the downscaler pretends to be one.
func (downscaler) Judge() scenarios.Judge { return scaler.NewJudge() }

func (downscaler) New(in scenarios.Instance) (scenarios.Runner, error) {
	return runnerFunc(func(ctx context.Context) error {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
			list, err := in.Client.AppsV1().Deployments(in.Namespace).List(ctx, metav1.ListOptions{LabelSelector: controller.LabelEnabled + "=" + controller.ValueEnabled})
			if err != nil {
				continue
			}
			for _, d := range list.Items {
				down(ctx, in, d)
			}
		}
	}), nil
}

func down(ctx context.Context, in scenarios.Instance, d appsv1.Deployment) {
	if d.Spec.Replicas == nil || *d.Spec.Replicas <= 1 {
		return
	}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, *d.Spec.Replicas-1)
	_, _ = in.Client.AppsV1().Deployments(in.Namespace).Patch(ctx, d.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
}

type runnerFunc func(ctx context.Context) error

func (f runnerFunc) Run(ctx context.Context) error { return f(ctx) }

const failingScenario = `
name: downscale-after-refused-list
description: the first list of Deployments is refused; the controller then scales down
catches: a controller that lowers replicas
objects:
  - count: 2
    manifest:
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: web-{{index}}
        labels: {app: "web-{{index}}", converge.dev/scaler: enabled}
        annotations: {converge.dev/max-replicas: "8"}
      spec:
        replicas: 4
        selector: {matchLabels: {app: "web-{{index}}"}}
        template:
          metadata: {labels: {app: "web-{{index}}"}}
          spec: {containers: [{name: app, image: registry.invalid/app:1}]}
world: {readiness: {kind: ready-after-delay, delay: 1s}}
faults:
  - {fault: server-error, code: 503, target: {verbs: [list], resource: deployments}, when: {nth: 1}}
timing: {deadline: 30s, settle: 5s}
`

// failingRun runs the downscaler through failingScenario on fake.
func failingRun(t *testing.T) *reports.Result {
	t.Helper()
	s, err := scenarios.Parse("downscale.yaml", []byte(failingScenario))
	require.NoError(t, err)
	var res *reports.Result
	synctest.Test(t, func(t *testing.T) {
		res = scenarios.Run(t.Context(), s, scenarios.Options{Backend: fake.Kind{}, Seed: 1, Controller: downscaler{}, Replay: "go test ./reports -run TestReportInBrowser"})
	})
	require.Empty(t, res.Error)
	require.False(t, res.Pass)
	require.NotEmpty(t, res.Violations)
	return res
}

// TestReportInBrowser loads the report of a failing run in headless
// Chromium: no console errors, the charts and the violation marker are
// there, the fault that preceded the violation shows in the first screen,
// the log's rows put the cursor on the timeline, and hostile names stay
// text. The screenshot goes into the test's artifact folder (go test
// -artifacts keeps it).
func TestReportInBrowser(t *testing.T) {
	b := newBrowser(t)
	res := failingRun(t)
	// A hostile name, as a cluster could hand back in any string.
	res.History.States = append(res.History.States, reports.State{At: res.Started.Add(time.Second), Deployment: `<img src=x onerror=alert(1)>`, Desired: 1, Max: 2})
	res.Violations[0].Detail += ` <img src=x onerror=alert(1)>`

	dir := t.ArtifactDir()
	index, err := reports.WriteHTML(dir, []*reports.Result{res}, "")
	require.NoError(t, err)
	runPage := filepath.Join(dir, reports.RunPageName(res))

	ctx := b.ctx
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+runPage), chromedp.WaitReady(chromedp.CSS(".chart-wrap svg"))))
	eval := func(expr string) any {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
		require.NoError(t, err, expr)
		return v
	}
	svgs := eval(`document.querySelectorAll(".chart-wrap svg").length`)
	paths := eval(`document.querySelectorAll(".chart-wrap svg path").length`)
	markers := eval(`document.querySelectorAll(".marker.violation").length`)
	markerLeft := eval(`document.querySelector(".marker.violation").style.left`)
	imgs := eval(`document.querySelectorAll("img").length`)
	preceding := eval(`document.querySelector("#preceding-fault").textContent`)
	precedingBottom := eval(`document.querySelector("#preceding-fault").getBoundingClientRect().bottom`)
	viewport := eval(`window.innerHeight`)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	// A row of the log puts the cursor on its instant.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".log tr.k-violation"))))
	cursorShown := eval(`getComputedStyle(document.querySelector(".cursor")).display !== "none"`)
	// The filter keeps the rows that hold its text: here the violation's.
	eval(`(() => { const f = document.querySelector("#log-filter"); f.value = "never-scales-down"; f.dispatchEvent(new Event("input")); return true })()`)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll(".log tbody tr:not(.hidden)").length < document.querySelectorAll(".log tbody tr").length`))
	require.NoError(t, err, "the log filter hides rows")
	assert.Equal(t, true, eval(`[...document.querySelectorAll(".log tbody tr:not(.hidden)")].every(tr => tr.textContent.includes("never-scales-down"))`))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "failing-run.png"), png, 0o644))
	t.Logf("report: %s; screenshot: %s", runPage, filepath.Join(dir, "failing-run.png"))

	assert.EqualValues(t, 1, svgs, "the charts are drawn")
	assert.Greater(t, paths, 20.0, "the charts have lines and bands")
	assert.EqualValues(t, len(res.Violations), markers, "each violation is marked on the timeline")
	assert.NotEmpty(t, markerLeft, "the marker is placed at its instant")
	assert.Contains(t, preceding, "server-error", "the fault that preceded the violation is named")
	assert.Less(t, precedingBottom, viewport, "and shows without scrolling")
	assert.Equal(t, true, cursorShown, "a log row puts the cursor on the timeline")
	assert.EqualValues(t, 0, imgs, "a hostile name stays text")

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+index), chromedp.WaitReady(chromedp.CSS("table.runs"))))
	assert.EqualValues(t, 1, eval(`document.querySelectorAll("table.runs tbody tr.fail").length`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("table.runs th[data-sort]:nth-child(4)"))))

	problems, dialogs := b.reported()
	assert.Empty(t, problems, "console errors")
	assert.Empty(t, dialogs, "a dialog opened: markup from the result ran")
}

// bigResult is a run with n history events: requests, watch events, faults
// and samples over ten minutes, on 50 Deployments.
func bigResult(n int) *reports.Result {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &reports.Result{Schema: reports.SchemaVersion, Scenario: "big", Backend: "fake", Seed: 1, Controller: "scaler",
		Started: start, Simulated: reports.Duration(10 * time.Minute), Converged: true, TimeToConverge: reports.Duration(5 * time.Minute),
		Invariants: []string{"replicas-within-max"}, Counters: reports.Counters{Writes: map[string]int{}, Needed: map[string]int{}}}
	step := 10 * time.Minute / time.Duration(n)
	codes := []int{200, 200, 200, 409, 429, 410, 503}
	for i := range n {
		at := start.Add(time.Duration(i) * step)
		name := fmt.Sprintf("web-%d", i%50)
		switch i % 4 {
		case 0, 1:
			r.History.Requests = append(r.History.Requests, reports.Request{At: at, Verb: "patch", Resource: "deployments", Name: name, Code: codes[i%len(codes)]})
		case 2:
			r.History.Events = append(r.History.Events, reports.WatchEvent{At: at, Type: "MODIFIED", Resource: "deployments", Name: name, RV: fmt.Sprint(i)})
			r.History.States = append(r.History.States, reports.State{At: at, Deployment: name, Desired: int32(i % 16), Pods: int32(i % 15), Ready: int32(i % 13), Max: 16})
		case 3:
			r.History.Samples = append(r.History.Samples, reports.Sample{At: at, QueueDepth: i % 7, Reconciles: int64(i)})
		}
	}
	return r
}

// TestBigReportInBrowser renders a run with 10,000 history events and logs
// how long Chromium takes to load it (BenchmarkBigReportInBrowser measures
// it; a test never asserts a wall-clock time).
func TestBigReportInBrowser(t *testing.T) {
	tier.Full(t, "10,000 events in Chromium: a measure of size, not of behaviour (TestReportInBrowser checks that)")
	b := newBrowser(t)
	dir := t.TempDir()
	_, err := reports.WriteHTML(dir, []*reports.Result{bigResult(10_000)}, "")
	require.NoError(t, err)
	ms := loadTime(t, b, filepath.Join(dir, "runs", "big_fake_1.html"))
	t.Logf("10,000 events: loaded in %.0f ms", ms)
	problems, _ := b.reported()
	assert.Empty(t, problems)
}

// loadTime loads a page and returns the browser's own measure, in ms, from
// the navigation's start to the end of its load event, after the rows are
// there.
func loadTime(t testing.TB, b *browser, path string) float64 {
	t.Helper()
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Navigate("file://"+path), chromedp.WaitReady(chromedp.CSS(".log tbody tr"))))
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`performance.getEntriesByType("navigation")[0].loadEventEnd > 0`))
	require.NoError(t, err)
	rows, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll(".log tbody tr").length`))
	require.NoError(t, err)
	require.Greater(t, rows, 9_000)
	ms, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](`performance.getEntriesByType("navigation")[0].loadEventEnd`))
	require.NoError(t, err)
	return ms
}

// BenchmarkBigReportInBrowser: a run page with 10,000 history events,
// loaded in headless Chromium; ms/load is the browser's own measure.
func BenchmarkBigReportInBrowser(b *testing.B) {
	br := newBrowser(b)
	dir := b.TempDir()
	_, err := reports.WriteHTML(dir, []*reports.Result{bigResult(10_000)}, "")
	require.NoError(b, err)
	path := filepath.Join(dir, "runs", "big_fake_1.html")
	var total float64
	for b.Loop() {
		total += loadTime(b, br, path)
	}
	b.ReportMetric(total/float64(b.N), "ms/load")
}

// BenchmarkRenderRun: building the page of a run with 10,000 history
// events, charts included.
func BenchmarkRenderRun(b *testing.B) {
	r := bigResult(10_000)
	var size int
	for b.Loop() {
		var buf strings.Builder
		if err := reports.RenderRun(&buf, r, ""); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size)/1e6, "MB/page")
}

// BenchmarkRead: reading back the result of a run with 10,000 history
// events, as a report does for each run.
func BenchmarkRead(b *testing.B) {
	path, err := reports.Write(b.TempDir(), bigResult(10_000))
	require.NoError(b, err)
	st, err := os.Stat(path)
	require.NoError(b, err)
	for b.Loop() {
		if _, err := reports.Read(path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Size())/1e6, "MB/file")
}

// BenchmarkReadSummary: reading back the same result without its
// history, as a report does for a run whose page is written.
func BenchmarkReadSummary(b *testing.B) {
	path, err := reports.Write(b.TempDir(), bigResult(10_000))
	require.NoError(b, err)
	for b.Loop() {
		if _, err := reports.ReadSummary(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrite: writing the result of a run with 10,000 history events,
// as each run does.
func BenchmarkWrite(b *testing.B) {
	r, dir := bigResult(10_000), b.TempDir()
	for b.Loop() {
		if _, err := reports.Write(dir, r); err != nil {
			b.Fatal(err)
		}
	}
}
