package main

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"os"
	"regexp"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/kuberetry/retry/lab/internal/figure"
)

// csvHeader is the CSV's header. A row is one of three kinds: requests
// (policy, what: the kind of request, start_s and end_s: the bucket,
// requests: how many were sent in it), failure (what failed, from start_s
// to end_s) or hold (policy, what: the scope, start_s and end_s, probes,
// waited, error: the failure that started it). Times are in seconds from
// the timeline's start.
var csvHeader = []string{"scenario", "kind", "policy", "what", "start_s", "end_s", "requests", "probes", "waited", "error"}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }

// writeCSV writes the results' failures, holds and requests per bucket.
func writeCSV(path string, rs []*result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write(csvHeader)
	for _, r := range rs {
		_ = w.Write([]string{r.name, "failure", "", r.failure, seconds(r.since(r.failStart)), seconds(r.since(r.failEnd)), "", "", "", ""})
		for _, c := range r.ctrls {
			for _, h := range c.holds.all() {
				end := ""
				if !h.End.IsZero() {
					end = seconds(r.since(h.End))
				}
				_ = w.Write([]string{r.name, "hold", c.policy, scopeName(h.Scope), seconds(r.since(h.Start)), end, "",
					strconv.Itoa(h.Probes), strconv.Itoa(h.Waited), sanitize(h.Err)})
			}
		}
		n := r.buckets()
		for _, c := range r.ctrls {
			counts := c.wire.counts(r.start, n)
			for _, what := range r.kinds(counts) {
				for i := range n {
					from := float64(i) * bucket.Seconds()
					_ = w.Write([]string{r.name, "requests", c.policy, what, seconds(from), seconds(from + bucket.Seconds()),
						strconv.Itoa(at(counts[what], i)), "", "", ""})
				}
			}
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// kinds returns the kinds of request r plots, what failed first, and then
// any other kind found in counts, in a fixed order.
func (r *result) kinds(counts map[string][]int) []string {
	ks := []string{r.failing}
	if r.healthy != "" {
		ks = append(ks, r.healthy)
	}
	for _, k := range []string{configMaps, secretWrites, secretReads, otherRequests} {
		if counts[k] != nil && !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	return ks
}

func at(xs []int, i int) int {
	if xs == nil {
		return 0
	}
	return xs[i]
}

var (
	serverScope = regexp.MustCompile(`^(https?://)[^/]+$`)
	hostPort    = regexp.MustCompile(`(127\.0\.0\.1|\[::1\]|localhost):[0-9]+`)
)

// scopeName is a scope as the budget names it, a server's host and port
// (this run's, on loopback) written HOST:PORT.
func scopeName(s string) string { return serverScope.ReplaceAllString(s, "${1}HOST:PORT") }

// sanitize writes the loopback addresses of an error as HOST:PORT.
func sanitize(s string) string { return hostPort.ReplaceAllString(s, "HOST:PORT") }

// Okabe and Ito's colours, for colour-blind readers.
var (
	red    = color.RGBA{R: 0xd5, G: 0x5e, A: 0xff}
	blue   = color.RGBA{G: 0x72, B: 0xb2, A: 0xff}
	orange = color.RGBA{R: 0xe6, G: 0x9f, A: 0xff}
	sky    = color.RGBA{R: 0x56, G: 0xb4, B: 0xe9, A: 0xff}
	shade  = color.NRGBA{R: 0x00, G: 0x9e, B: 0x73, A: 0x38} // not premultiplied: a light green
	grey   = color.RGBA{R: 0x60, G: 0x60, B: 0x60, A: 0xff}
)

// drawTimeline draws one panel per result, stacked: the requests per
// bucket of what failed, with and without the budget, and of what did
// not (thinner), the failure between dashed lines and the budget's holds
// shaded.
func drawTimeline(path string, rs []*result) error {
	const width, panelHeight = 11 * vg.Inch, 3.6 * vg.Inch
	canvas := vgimg.NewWith(vgimg.UseWH(width, panelHeight*vg.Length(len(rs))), vgimg.UseDPI(100))
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(rs), Cols: 1, PadY: vg.Points(10), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10)}
	for i, r := range rs {
		p, err := r.panel()
		if err != nil {
			return err
		}
		p.Draw(tiles.At(dc, 0, i))
	}
	return figure.WritePNG(path, canvas)
}

// panel is r's plot.
func (r *result) panel() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = r.title
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "requests per 100 ms"
	p.Add(plotter.NewGrid())
	n := r.buckets()

	var holds []span
	for _, h := range r.ctrls[1].holds.all() {
		end := h.End
		if end.IsZero() {
			end = r.end
		}
		holds = append(holds, span{from: r.since(h.Start), to: r.since(end)})
	}
	marks := &spans{fill: shade, holds: holds, failure: span{from: r.since(r.failStart), to: r.since(r.failEnd)}}
	p.Add(marks)

	type series struct {
		what   string
		colour color.Color
		width  vg.Length
		dashes []vg.Length
	}
	var lines []series
	lines = append(lines, series{r.failing, red, 1.6, nil}, series{r.failing, blue, 1.6, nil})
	if r.healthy != "" {
		lines = append(lines, series{r.healthy, orange, 1, []vg.Length{vg.Points(3), vg.Points(2)}}, series{r.healthy, sky, 1, []vg.Length{vg.Points(3), vg.Points(2)}})
	}
	ymax := 1.0
	for k, s := range lines {
		c := r.ctrls[k%2]
		counts := c.wire.counts(r.start, n)[s.what]
		xys := make(plotter.XYs, n+1)
		for i := range n + 1 {
			xys[i].X = float64(i) * bucket.Seconds()
			xys[i].Y = float64(at(counts, min(i, n-1)))
			ymax = max(ymax, xys[i].Y)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.StepStyle = plotter.PostStep
		l.Color, l.Width, l.Dashes = s.colour, vg.Points(float64(s.width)), s.dashes
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s: %s", c.policy, s.what), l)
	}
	if len(holds) > 0 {
		p.Legend.Add("NewBudget() held "+heldNames(r), thumb{shade})
	}
	p.X.Min, p.X.Max = 0, float64(n)*bucket.Seconds()
	p.Y.Min, p.Y.Max = 0, ymax*1.45 // room above the lines for the legend
	p.Legend.Top = true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(-6), vg.Points(-4)
	p.Legend.ThumbnailWidth = vg.Points(16)
	return p, nil
}

// heldNames names the scopes the budget held in r.
func heldNames(r *result) string {
	var names []string
	for _, h := range r.ctrls[1].holds.all() {
		if n := scopeName(h.Scope); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	s := ""
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}

// span is a time range on the timeline, in seconds.
type span struct{ from, to float64 }

// spans draws the holds shaded over the plot's height, and the failure's
// start and end as dashed lines.
type spans struct {
	fill    color.Color
	holds   []span
	failure span
}

func (s *spans) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, h := range s.holds {
		x0, x1 := trX(h.from), trX(h.to)
		c.FillPolygon(s.fill, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
	}
	sty := draw.LineStyle{Color: grey, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}
	for _, x := range []float64{s.failure.from, s.failure.to} {
		c.StrokeLine2(sty, trX(x), c.Min.Y, trX(x), c.Max.Y)
	}
}

// thumb is a legend's shaded square.
type thumb struct{ fill color.Color }

func (t thumb) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(t.fill, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}})
}
