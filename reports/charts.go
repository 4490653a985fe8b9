package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/converge-lab/converge/internal/bounded"
)

// The run page's charts are drawn by gonum/plot into one SVG: rows stacked
// and aligned on one time axis, so that a fault window shades the same
// columns of every row, as Jepsen shades its nemesis regions.

// chart is the rendered SVG and where its data area lies, as fractions of
// its width, so the page can put a cursor on an instant.
type chart struct {
	SVG         template.HTML
	Left, Right float64 // data area, as fractions of the width
	T0, T1      float64 // the time axis's range, seconds
	Rows        []string
}

// maxCharted is how many Deployments get a row of their own.
const maxCharted = 8

var (
	colDesired = color.RGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}
	colPods    = color.NRGBA{R: 0x88, G: 0x88, B: 0x88, A: 0x70}
	colReady   = color.RGBA{R: 0x1a, G: 0x9a, B: 0x3a, A: 0xff}
	colMax     = color.RGBA{R: 0xc0, G: 0x20, B: 0x20, A: 0xff}
	colConv    = color.RGBA{R: 0x1a, G: 0x9a, B: 0x3a, A: 0xff}
	colBreak   = color.RGBA{R: 0xd0, G: 0x00, B: 0x00, A: 0xff}

	// Fault lanes, by lane index.
	lanePalette = []color.RGBA{
		{R: 0xe6, G: 0x7e, B: 0x22, A: 0xff}, {R: 0x8e, G: 0x44, B: 0xad, A: 0xff},
		{R: 0x29, G: 0x80, B: 0xb9, A: 0xff}, {R: 0xc0, G: 0x39, B: 0x2b, A: 0xff},
		{R: 0x16, G: 0xa0, B: 0x85, A: 0xff}, {R: 0x7f, G: 0x8c, B: 0x8d, A: 0xff},
	}

	// Status classes, stacked in this order; 409, 429, 410 and 5xx stand out.
	codeClasses = []struct {
		class, label string
		col          color.RGBA
	}{
		{"ok", "2xx", color.RGBA{R: 0xc8, G: 0xc8, B: 0xc8, A: 0xff}},
		{"client", "other 4xx", color.RGBA{R: 0x99, G: 0x77, B: 0x55, A: 0xff}},
		{"409", "409", color.RGBA{R: 0xe6, G: 0x7e, B: 0x22, A: 0xff}},
		{"429", "429", color.RGBA{R: 0x8e, G: 0x44, B: 0xad, A: 0xff}},
		{"expired", "410", color.RGBA{R: 0x29, G: 0x80, B: 0xb9, A: 0xff}},
		{"server", "5xx", color.RGBA{R: 0xc0, G: 0x20, B: 0x20, A: 0xff}},
		{"error", "no answer", color.RGBA{R: 0x22, G: 0x22, B: 0x22, A: 0xff}},
	}
)

// laneColor is lane i's colour with the given opacity.
func laneColor(i int, alpha uint8) color.NRGBA {
	c := lanePalette[i%len(lanePalette)]
	return color.NRGBA{R: c.R, G: c.G, B: c.B, A: alpha}
}

// overview draws the run's rows: faults, requests by status, requests by
// verb, the controller's queue and reconciles, then up to maxCharted
// Deployments.
func overview(r *Result, p *runPage) (chart, error) {
	end := r.end()
	bucket := bucketWidth(end)
	var rows []*plot.Plot
	var names []string
	add := func(name string, pl *plot.Plot) {
		rows = append(rows, pl)
		names = append(names, name)
	}

	add("faults", faultRow(p.Faults))
	byCode, byVerb := requestRows(r, bucket, end)
	add("requests by status", byCode)
	add("requests by verb", byVerb)
	add("controller", controllerRow(r, bucket, end))
	deployments := charted(r)
	p.Shown, p.Total = len(deployments), len(r.Counters.Needed)
	if p.Total < p.Shown {
		p.Total = p.Shown
	}
	for _, d := range deployments {
		add("deployment "+d, deploymentRow(r, d, end))
	}
	objects := chartedObjects(r)
	p.Shown += len(objects)
	p.Total += len(seriesObjects(r))
	for _, o := range objects {
		add(o, objectRow(r, o, end))
	}

	// Every row: the same time axis, the fault windows shaded, convergence
	// and violations marked.
	var shade []band
	for i, l := range p.Faults {
		for _, w := range l.Windows {
			shade = append(shade, band{w.From, w.To, laneColor(i, 0x22)})
		}
	}
	var marks []mark
	if r.Converged {
		marks = append(marks, mark{seconds(r.TimeToConverge), colConv, "converged"})
	}
	for _, b := range p.Breaks {
		marks = append(marks, mark{b.T, colBreak, "violation"})
	}
	for i, pl := range rows {
		pl.X.Min, pl.X.Max = 0, end
		pl.X.Label.Text = ""
		if i == len(rows)-1 {
			pl.X.Label.Text = "seconds from the start"
		}
		pl.Add(bands(shade))
		pl.Add(marksPlotter(marks))
		pl.Title.TextStyle.Font.Size = vg.Points(10)
		pl.Title.Padding = vg.Points(2)
		pl.Legend.Top = true
		pl.Legend.Left = false
		pl.Legend.TextStyle.Font.Size = vg.Points(7)
		pl.Legend.ThumbnailWidth = vg.Points(12)
		pl.Legend.Padding = vg.Points(1)
		pl.Y.Tick.Label.Font.Size = vg.Points(7)
		pl.X.Tick.Label.Font.Size = vg.Points(7)
	}

	const width = 11 * vg.Inch
	rowHeight := 1.7 * vg.Inch
	height := rowHeight * vg.Length(len(rows))
	c := vgsvg.New(width, height)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(10)}
	grid := make([][]*plot.Plot, len(rows))
	for i, pl := range rows {
		grid[i] = []*plot.Plot{pl}
	}
	canvases := plot.Align(grid, tiles, dc)
	for i, pl := range rows {
		pl.Draw(canvases[i][0])
	}
	data := rows[0].DataCanvas(canvases[0][0])
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return chart{}, fmt.Errorf("reports: drawing the charts: %w", err)
	}
	svg := buf.String()
	// The SVG is sized in points; the page scales it to its width.
	if i := strings.Index(svg, "<svg"); i >= 0 {
		svg = svg[i:]
	}
	return chart{
		SVG:  template.HTML(svg), // drawn by vgsvg, which escapes every text it writes
		Left: float64(data.Min.X / width), Right: float64(data.Max.X / width),
		T0: 0, T1: end, Rows: names,
	}, nil
}

func seconds(d Duration) float64 { return float64(d) / 1e9 }

// bucketWidth is the width in seconds of the bins requests are counted in:
// about 120 bins over the run, on a round number.
func bucketWidth(end float64) float64 {
	raw := end / 120
	for _, w := range []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600} {
		if raw <= w {
			return w
		}
	}
	return math.Ceil(raw/600) * 600
}

func faultRow(lanes []laneView) *plot.Plot {
	pl := newPlot()
	pl.Title.Text = "faults: declared windows shaded, firings as ticks"
	var ticks []plot.Tick
	for i, l := range lanes {
		y := float64(len(lanes) - 1 - i)
		ticks = append(ticks, plot.Tick{Value: y, Label: shorten(l.Name, 40)})
		var lane laneBands
		for _, w := range l.Windows {
			lane = append(lane, laneBand{From: w.From, To: w.To, Y: y, Col: laneColor(i, 0x66)})
		}
		for _, t := range l.Firings {
			lane = append(lane, laneBand{From: t, To: t, Y: y, Col: laneColor(i, 0xff), Tick: true})
		}
		pl.Add(lane)
	}
	if len(lanes) == 0 {
		ticks = []plot.Tick{{Value: 0, Label: "no faults"}}
	}
	pl.Y.Tick.Marker = plot.ConstantTicks(ticks)
	pl.Y.Min, pl.Y.Max = -0.6, math.Max(float64(len(lanes))-0.4, 0.4)
	return pl
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func requestRows(r *Result, bucket, end float64) (byCode, byVerb *plot.Plot) {
	n := int(math.Ceil(end/bucket)) + 1
	counts := map[string][]float64{}
	verbs := map[string][]float64{}
	for _, q := range r.History.Requests {
		i := int(r.secs(q.At) / bucket)
		if i < 0 || i >= n {
			continue
		}
		class := codeClass(q.Code)
		if counts[class] == nil {
			counts[class] = make([]float64, n)
		}
		counts[class][i]++
		if verbs[q.Verb] == nil {
			verbs[q.Verb] = make([]float64, n)
		}
		verbs[q.Verb][i]++
	}

	byCode = newPlot()
	byCode.Title.Text = fmt.Sprintf("requests of the controller by status, per %gs", bucket)
	// Stacked: draw the running totals from the top class down.
	total := make([]float64, n)
	var layers []*plotter.Histogram
	var labels []string
	for _, cc := range codeClasses {
		c := counts[cc.class]
		if c == nil {
			continue
		}
		for i := range total {
			total[i] += c[i]
		}
		h := &plotter.Histogram{Width: bucket, FillColor: cc.col}
		h.LineStyle.Width = 0
		for i, v := range total {
			h.Bins = append(h.Bins, plotter.HistogramBin{Min: float64(i) * bucket, Max: float64(i+1) * bucket, Weight: v})
		}
		layers = append(layers, h)
		labels = append(labels, cc.label)
	}
	for i := len(layers) - 1; i >= 0; i-- {
		byCode.Add(layers[i])
	}
	for i, h := range layers {
		byCode.Legend.Add(labels[i], h)
	}
	byCode.Y.Min = 0

	byVerb = newPlot()
	byVerb.Title.Text = fmt.Sprintf("requests by verb, per %gs", bucket)
	names := make([]string, 0, len(verbs))
	for v := range verbs {
		names = append(names, v)
	}
	sort.Strings(names)
	for i, v := range names {
		pts := make(plotter.XYs, 0, n+1)
		for j, c := range verbs[v] {
			pts = append(pts, plotter.XY{X: float64(j) * bucket, Y: c})
		}
		pts = append(pts, plotter.XY{X: float64(n) * bucket, Y: 0})
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue
		}
		l.StepStyle = plotter.PostStep
		l.Color = laneColor(i, 0xff)
		l.Width = vg.Points(1)
		byVerb.Add(l)
		byVerb.Legend.Add(v, l)
	}
	byVerb.Y.Min = 0
	return byCode, byVerb
}

func controllerRow(r *Result, bucket, end float64) *plot.Plot {
	pl := newPlot()
	pl.Title.Text = fmt.Sprintf("controller: queue depth; reconciles and retries per %gs", bucket)
	s := r.History.Samples
	if len(s) == 0 {
		pl.Title.Text = "controller: no probe (its Runner is no scenarios.Prober, or it runs out of process): nothing sampled"
		pl.Y.Min, pl.Y.Max = 0, 1
		return pl
	}
	queue := make(plotter.XYs, 0, len(s)+1)
	for _, x := range s {
		queue = append(queue, plotter.XY{X: r.secs(x.At), Y: float64(x.QueueDepth)})
	}
	queue = append(queue, plotter.XY{X: end, Y: queue[len(queue)-1].Y})
	n := int(math.Ceil(end/bucket)) + 1
	rec, ret := make([]float64, n), make([]float64, n)
	var prev Sample
	for _, x := range s {
		i := min(max(int(r.secs(x.At)/bucket), 0), n-1)
		rec[i] += float64(x.Reconciles - prev.Reconciles)
		ret[i] += float64(x.Retries - prev.Retries)
		prev = x
	}
	series := []struct {
		name string
		pts  plotter.XYs
		col  color.RGBA
	}{
		{"queue depth", queue, colDesired},
		{"reconciles", perBucket(rec, bucket), colReady},
		{"retries", perBucket(ret, bucket), colMax},
	}
	for _, se := range series {
		l, err := plotter.NewLine(se.pts)
		if err != nil {
			continue
		}
		l.StepStyle = plotter.PostStep
		l.Color = se.col
		l.Width = vg.Points(1)
		pl.Add(l)
		pl.Legend.Add(se.name, l)
	}
	pl.Y.Min = 0
	return pl
}

func perBucket(v []float64, bucket float64) plotter.XYs {
	pts := make(plotter.XYs, 0, len(v)+1)
	for i, c := range v {
		pts = append(pts, plotter.XY{X: float64(i) * bucket, Y: c})
	}
	return append(pts, plotter.XY{X: float64(len(v)) * bucket, Y: 0})
}

// charted picks the Deployments that get a row: those a violation names,
// then the most written, then by name.
func charted(r *Result) []string {
	seen := map[string]bool{}
	for _, s := range r.History.States {
		seen[s.Deployment] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	broken := func(name string) bool {
		return slices.ContainsFunc(r.Violations, func(v Violation) bool {
			return v.Object == name || strings.HasSuffix(v.Object, "/"+name)
		})
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := names[i], names[j]
		if broken(a) != broken(b) {
			return broken(a)
		}
		if wa, wb := r.Counters.Writes["deployments/"+a], r.Counters.Writes["deployments/"+b]; wa != wb {
			return wa > wb
		}
		return a < b
	})
	return names[:min(len(names), maxCharted)]
}

// seriesObjects are the objects with series (Kind/name), in the order
// first seen.
func seriesObjects(r *Result) []string {
	var out []string
	for _, s := range r.History.Series {
		if o := s.Object(); !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// chartedObjects picks the objects whose series get a row: those a
// violation names first, then in the order first seen, up to maxCharted.
func chartedObjects(r *Result) []string {
	objects := seriesObjects(r)
	broken := func(object string) bool {
		_, name, _ := strings.Cut(object, "/")
		return slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Object == name })
	}
	sort.SliceStable(objects, func(i, j int) bool { return broken(objects[i]) && !broken(objects[j]) })
	return objects[:min(len(objects), maxCharted)]
}

// objectRow draws an object's series: one step line per field.
func objectRow(r *Result, object string, end float64) *plot.Plot {
	pl := newPlot()
	var fields []string
	i := 0
	for _, s := range r.History.Series {
		if s.Object() != object || len(s.Points) == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, len(s.Points)+1)
		for _, p := range s.Points {
			pts = append(pts, plotter.XY{X: r.secs(p.At), Y: p.Value})
		}
		pts = append(pts, plotter.XY{X: end, Y: pts[len(pts)-1].Y})
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue
		}
		l.StepStyle = plotter.PostStep
		l.Color = laneColor(i, 0xff)
		l.Width = vg.Points(1.4)
		pl.Add(l)
		pl.Legend.Add(shorten(s.Field, 40), l)
		fields = append(fields, s.Field)
		i++
	}
	pl.Title.Text = shorten(object+": "+strings.Join(fields, ", "), 120)
	pl.Y.Min = math.Min(pl.Y.Min, 0)
	pl.Y.Max = math.Max(pl.Y.Max, 1) * 1.1
	return pl
}

func deploymentRow(r *Result, name string, end float64) *plot.Plot {
	pl := newPlot()
	pl.Title.Text = "deployment " + name + ": desired, pods and ready pods, and its max"
	var desired, pods, ready plotter.XYs
	var maxReplicas float64
	for _, s := range r.History.States {
		if s.Deployment != name {
			continue
		}
		t := r.secs(s.At)
		desired = append(desired, plotter.XY{X: t, Y: float64(s.Desired)})
		pods = append(pods, plotter.XY{X: t, Y: float64(s.Pods)})
		ready = append(ready, plotter.XY{X: t, Y: float64(s.Ready)})
		maxReplicas = math.Max(maxReplicas, float64(s.Max))
	}
	// Pods wide and pale under desired, so both show where they agree.
	series := []struct {
		name string
		pts  plotter.XYs
		col  color.Color
		w    vg.Length
	}{
		{"pods", pods, colPods, 4},
		{"ready", ready, colReady, 1.4},
		{"desired", desired, colDesired, 1.2},
	}
	for _, se := range series {
		if len(se.pts) == 0 {
			continue
		}
		pts := append(se.pts, plotter.XY{X: end, Y: se.pts[len(se.pts)-1].Y})
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue
		}
		l.StepStyle = plotter.PostStep
		l.Color = se.col
		l.Width = vg.Points(float64(se.w))
		pl.Add(l)
		pl.Legend.Add(se.name, l)
	}
	if maxReplicas > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: maxReplicas}, {X: end, Y: maxReplicas}})
		if err == nil {
			l.Color = colMax
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			pl.Add(l)
			pl.Legend.Add("max", l)
		}
	}
	pl.Y.Min = 0
	if maxReplicas > 0 {
		pl.Y.Max = math.Max(pl.Y.Max, maxReplicas*1.15)
	}
	return pl
}

// band shades a window over a row's whole height.
type band struct {
	From, To float64
	Col      color.Color
}

type bands []band

func (bs bands) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, b := range bs {
		x0, x1 := trX(b.From), trX(b.To)
		c.FillPolygon(b.Col, c.ClipPolygonX([]vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}}))
	}
}

// mark is a vertical line at an instant, over a row's whole height.
type mark struct {
	At    float64
	Col   color.Color
	Label string
}

type marksPlotter []mark

func (ms marksPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, m := range ms {
		x := trX(m.At)
		if x < c.Min.X || x > c.Max.X {
			continue
		}
		style := draw.LineStyle{Color: m.Col, Width: vg.Points(1.5)}
		if m.Label == "converged" {
			style.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
		}
		c.StrokeLine2(style, x, c.Min.Y, x, c.Max.Y)
	}
}

// laneBand is a window (or, with Tick, a firing) on one fault lane.
type laneBand struct {
	From, To, Y float64
	Col         color.Color
	Tick        bool
}

type laneBands []laneBand

func (ls laneBands) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, l := range ls {
		y0, y1 := trY(l.Y-0.3), trY(l.Y+0.3)
		if l.Tick {
			x := trX(l.From)
			if x >= c.Min.X && x <= c.Max.X {
				c.StrokeLine2(draw.LineStyle{Color: l.Col, Width: vg.Points(1.2)}, x, y0, x, y1)
			}
			continue
		}
		x0, x1 := trX(l.From), trX(l.To)
		c.FillPolygon(l.Col, c.ClipPolygonX([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}))
	}
}

// DataRange keeps the lanes' rows inside the plot.
func (ls laneBands) DataRange() (xmin, xmax, ymin, ymax float64) {
	if len(ls) == 0 {
		return 0, 0, 0, 0
	}
	xmin, xmax, ymin, ymax = math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, l := range ls {
		xmin, xmax = math.Min(xmin, l.From), math.Max(xmax, l.To)
		ymin, ymax = math.Min(ymin, l.Y-0.5), math.Max(ymax, l.Y+0.5)
	}
	return
}

// newPlot is plot.New with its texts measured through measuredText.
func newPlot() *plot.Plot {
	pl := plot.New()
	pl.TextHandler = measuredText
	pl.Title.TextStyle.Handler = measuredText
	pl.Legend.TextStyle.Handler = measuredText
	for _, a := range []*plot.Axis{&pl.X, &pl.Y} {
		a.Label.TextStyle.Handler = measuredText
		a.Tick.Label.Handler = measuredText
	}
	return pl
}

// measuredText is gonum's default text handler, remembering the size of
// each text it measured in each font: laying a page's rows out measures
// the same titles and tick labels over and over, a sixth of a page's
// rendering, and the pages of a report share most of them.
var measuredText = &measured{Handler: plot.DefaultTextHandler, boxes: bounded.Map[textInFont, [3]vg.Length]{Limit: 4096}}

type measured struct {
	text.Handler
	boxes bounded.Map[textInFont, [3]vg.Length]
}

type textInFont struct {
	text string
	font font.Font
}

// Box is the wrapped handler's, from memory when it measured txt in fnt
// before.
func (m *measured) Box(txt string, fnt font.Font) (width, height, depth vg.Length) {
	k := textInFont{txt, fnt}
	if b, ok := m.boxes.Get(k); ok {
		return b[0], b[1], b[2]
	}
	width, height, depth = m.Handler.Box(txt, fnt)
	m.boxes.Put(k, [3]vg.Length{width, height, depth})
	return width, height, depth
}
