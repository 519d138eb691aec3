package main

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/kuberetry/retry/integration/testenv/contention"
	"github.com/kuberetry/retry/lab/internal/figure"
)

// csvHeader names the columns of study.csv, one row per run.
var csvHeader = []string{
	"form", "repetition", "strategy", "steps", "writers", "updates_per_writer",
	"attempted", "succeeded", "gave_up", "success_rate", "conflicts", "attempts",
	"requests", "requests_per_success", "p50_ms", "p99_ms", "wall_ms",
}

// writeCSV writes rs to path, one row per run.
func writeCSV(path string, rs []record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(csvHeader)
	for _, r := range rs {
		reqs := ""
		if x := r.RequestsPerUpdate(); x >= 0 {
			reqs = strconv.FormatFloat(x, 'f', 3, 64)
		}
		w.Write([]string{
			r.Form, strconv.Itoa(r.Repetition), r.Name, strconv.Itoa(r.Steps),
			strconv.Itoa(r.Writers), strconv.Itoa(r.UpdatesPerWriter),
			strconv.Itoa(r.Updates), strconv.Itoa(r.Succeeded), strconv.Itoa(r.GaveUp),
			strconv.FormatFloat(r.SuccessRate(), 'f', 4, 64),
			strconv.Itoa(r.Conflicts), strconv.Itoa(r.Attempts), strconv.Itoa(r.Requests), reqs,
			ms(r.P50), ms(r.P99), ms(r.Wall),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// metric is a figure of one run; ok is false where it has none (requests
// per success when nothing succeeded).
type metric func(r record) (x float64, ok bool)

var (
	metricSuccess  metric = func(r record) (float64, bool) { return 100 * r.SuccessRate(), true }
	metricRequests metric = func(r record) (float64, bool) {
		x := r.RequestsPerUpdate()
		return x, x >= 0
	}
	metricP99  metric = func(r record) (float64, bool) { return float64(r.P99) / float64(time.Millisecond), true }
	metricWall metric = func(r record) (float64, bool) { return float64(r.Wall) / float64(time.Millisecond), true }
)

// group is the repetitions of one strategy at one writer count.
type group struct {
	writers int
	runs    []record
}

// stats returns the median, smallest and largest of m over the group's
// runs that have it; ok is false when none does.
func (g group) stats(m metric) (med, lo, hi float64, ok bool) {
	var xs []float64
	for _, r := range g.runs {
		if x, ok := m(r); ok {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return 0, 0, 0, false
	}
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return contention.Median(xs), lo, hi, true
}

// groups returns the runs of strategy name in rs by writer count,
// fewest writers first.
func groups(rs []record, name string) []group {
	var gs []group
	for _, r := range rs {
		if r.Name != name {
			continue
		}
		i := 0
		for i < len(gs) && gs[i].writers < r.Writers {
			i++
		}
		if i == len(gs) || gs[i].writers != r.Writers {
			gs = append(gs[:i], append([]group{{writers: r.Writers}}, gs[i:]...)...)
		}
		gs[i].runs = append(gs[i].runs, r)
	}
	return gs
}

// chart is one of the plots.
type chart struct {
	file, title, ylabel string
	m                   metric
	logY                bool
	legendTop           bool // else bottom; left either way
}

var charts = []chart{
	{file: "success.png", title: "Updates that got through", ylabel: "succeeded (% of updates)", m: metricSuccess},
	{file: "requests.png", title: "Requests per successful update (on the wire)", ylabel: "requests per successful update (log)", m: metricRequests, logY: true, legendTop: true},
	{file: "p99.png", title: "p99 latency of an update, retries included", ylabel: "p99 latency, ms (log)", m: metricP99, logY: true, legendTop: true},
}

// styles tell the strategies apart in the plots, in the order of names;
// colours from Okabe and Ito's palette for colour-blind readers, and a
// dash pattern and glyph each as well.
var styles = []struct {
	c      color.Color
	dashes []vg.Length
	glyph  draw.GlyphDrawer
}{
	{color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}, []vg.Length{vg.Points(2), vg.Points(2)}, draw.CrossGlyph{}},
	{color.RGBA{A: 0xff}, []vg.Length{vg.Points(2), vg.Points(2)}, draw.PlusGlyph{}},
	{color.RGBA{A: 0xff}, nil, draw.SquareGlyph{}},
	{color.RGBA{R: 0xe6, G: 0x9f, A: 0xff}, nil, draw.TriangleGlyph{}},
	{color.RGBA{R: 0x56, G: 0xb4, B: 0xe9, A: 0xff}, []vg.Length{vg.Points(6), vg.Points(2)}, draw.CircleGlyph{}},
	{color.RGBA{R: 0xcc, G: 0x79, B: 0xa7, A: 0xff}, []vg.Length{vg.Points(6), vg.Points(2)}, draw.RingGlyph{}},
	{color.RGBA{R: 0x00, G: 0x72, B: 0xb2, A: 0xff}, nil, draw.PyramidGlyph{}},
	{color.RGBA{R: 0x00, G: 0x9e, B: 0x73, A: 0xff}, nil, draw.BoxGlyph{}},
	{color.RGBA{R: 0xd5, G: 0x5e, A: 0xff}, nil, draw.CircleGlyph{}},
}

// drawPlots draws charts of rs, the records of form, into dir, one line
// per strategy of names, HotObjectBackoff's thicker, and returns the files
// written: study-*.png for the Update form, study-idiom-*.png for the
// other.
func drawPlots(dir, form string, names []string, rs []record, subtitle string) ([]string, error) {
	if len(names) > len(styles) {
		return nil, fmt.Errorf("%d strategies but styles for %d", len(names), len(styles))
	}
	prefix := "study-"
	if form != formUpdate {
		prefix = "study-idiom-"
	}
	var files []string
	for _, c := range charts {
		p := plot.New()
		p.Title.Text = c.title + ", through " + form + "\n" + subtitle
		p.X.Label.Text = "writers on one ConfigMap (log scale)"
		p.Y.Label.Text = c.ylabel
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = powersOfTwo{}
		if c.logY {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = ticks125{}
		}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = c.legendTop, true
		p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(-8)
		if !c.legendTop {
			p.Legend.YOffs = vg.Points(8)
		}
		p.Legend.ThumbnailWidth = vg.Points(30)
		for i, name := range names {
			// Each strategy a little to the side of the others, so that
			// bars at the same writer count stay apart.
			shift := math.Pow(2, 0.03*(float64(i)-float64(len(names)-1)/2))
			var pts spread
			for _, g := range groups(rs, name) {
				md, lo, hi, ok := g.stats(c.m)
				if !ok || (c.logY && lo <= 0) {
					continue
				}
				pts = append(pts, spreadPoint{x: float64(g.writers) * shift, y: md, lo: md - lo, hi: hi - md})
			}
			if len(pts) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, err
			}
			st := styles[i]
			line.Color, line.Dashes, line.Width = st.c, st.dashes, vg.Points(1.5)
			if name == nameHot || name == nameHotContention {
				line.Width = vg.Points(3)
			}
			points.Color, points.Shape, points.Radius = st.c, st.glyph, vg.Points(3)
			bars, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return nil, err
			}
			bars.Color, bars.Width, bars.CapWidth = st.c, vg.Points(1), vg.Points(4)
			p.Add(line, points, bars)
			p.Legend.Add(name, line, points)
		}
		if !c.logY {
			p.Y.Min, p.Y.Max = 0, 100
		}
		path := filepath.Join(dir, prefix+c.file)
		if err := savePNG(p, path); err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	return files, nil
}

// savePNG writes p as a 9x6 inch PNG at 110 dpi.
func savePNG(p *plot.Plot, path string) error {
	canvas := vgimg.NewWith(vgimg.UseWH(9*vg.Inch, 6*vg.Inch), vgimg.UseDPI(110))
	p.Draw(draw.New(canvas))
	return figure.WritePNG(path, canvas)
}

// spread is a line's points with the range of the repetitions around each.
type spread []spreadPoint

type spreadPoint struct{ x, y, lo, hi float64 }

func (s spread) Len() int                        { return len(s) }
func (s spread) XY(i int) (float64, float64)     { return s[i].x, s[i].y }
func (s spread) YError(i int) (float64, float64) { return s[i].lo, s[i].hi }

// powersOfTwo ticks a log axis at the writer counts 1, 2, 4, ...
type powersOfTwo struct{}

func (powersOfTwo) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for x := 1.0; x <= hi*1.001; x *= 2 {
		if x >= lo/1.001 {
			ticks = append(ticks, plot.Tick{Value: x, Label: strconv.Itoa(int(x))})
		}
	}
	return ticks
}

// ticks125 ticks a log axis at 1, 2, 5, 10, 20, 50, ... times a power of
// ten, labelled, so that values between powers of ten can be read.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for decade := math.Pow(10, math.Floor(math.Log10(lo))); decade <= hi; decade *= 10 {
		for _, m := range []float64{1, 2, 5} {
			x := m * decade
			if x >= lo && x <= hi {
				ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'g', -1, 64)})
			}
		}
	}
	return ticks
}
