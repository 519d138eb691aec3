package fleetsim

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/kuberetry/retry/lab/internal/figure"
)

var policyColours = map[string]color.Color{
	"none":  color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"rev6":  color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"rev6~": color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	"new":   color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

var policyOrder = []string{"none", "rev6", "rev6~", "new"}

var policyNames = map[string]string{
	"none": "no budget", "rev6": "revision 6's schedule", "rev6~": "r fixed near 1", "new": "the new schedule",
}

func policyColour(p string) color.Color {
	if c, ok := policyColours[p]; ok {
		return c
	}
	return color.Black
}

// scalePanel is one figure against the fleet's processes.
type scalePanel struct {
	title, ylabel string
	value         func(Row) float64
}

var scalePanels = []scalePanel{
	{"Requests during the outage, per process", "requests (probes included) / process", func(r Row) float64 {
		return float64(r.Summary.RequestsDuring) / float64(r.Processes)
	}},
	{"429s in the 2s after the end, per 1,000 processes", "429s / 1,000 processes", func(r Row) float64 {
		return float64(r.Summary.TooManyAfter) * 1000 / float64(r.Processes)
	}},
	{"p99 time back after the end", "seconds", func(r Row) float64 { return r.Summary.BackP99.Seconds() }},
}

// drawScale draws, for each outage length (a row of panels), each
// scalePanel against the processes (log scale), a line per policy and
// workers (4: solid, 1: dashed), the mean of the reps.
func drawScale(path string, rows []Row) error {
	var lengths []time.Duration
	for _, r := range rows {
		if !slices.Contains(lengths, r.Outage) {
			lengths = append(lengths, r.Outage)
		}
	}
	slices.Sort(lengths)
	const width, height = 20 * vg.Inch, 5 * vg.Inch
	canvas := vgimg.NewWith(vgimg.UseWH(width, height*vg.Length(len(lengths))), vgimg.UseDPI(90))
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: len(lengths), Cols: len(scalePanels), PadX: vg.Points(14), PadY: vg.Points(14),
		PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	for i, d := range lengths {
		for j, pn := range scalePanels {
			p := plot.New()
			p.Title.Text = fmt.Sprintf("%s (%v outage)", pn.title, d)
			p.Y.Label.Text = pn.ylabel
			p.X.Label.Text = "processes"
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = plot.ConstantTicks{{Value: 48, Label: "48"}, {Value: 500, Label: "500"},
				{Value: 5000, Label: "5,000"}, {Value: 50000, Label: "50,000"}}
			p.Add(plotter.NewGrid())
			for _, pol := range policyOrder {
				for _, w := range []int{4, 1} {
					pts := meanBy(rows, d, pol, w, pn.value)
					if len(pts) == 0 {
						continue
					}
					l, s, err := plotter.NewLinePoints(pts)
					if err != nil {
						return err
					}
					l.Color, s.Color = policyColour(pol), policyColour(pol)
					l.Width = vg.Points(1.5)
					if w == 1 {
						l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
					}
					p.Add(l, s)
					if i == 0 && j == 0 {
						p.Legend.Add(fmt.Sprintf("%s, %d worker(s)", policyNames[pol], w), l, s)
					}
				}
			}
			p.Y.Min = 0
			p.Y.Max = math.Max(p.Y.Max*1.1, 1)
			if i == 0 && j == 0 {
				p.Y.Max *= 1.6
				p.Legend.Top, p.Legend.Left = true, true
			}
			p.Draw(tiles.At(dc, j, i))
		}
	}
	return figure.WritePNG(path, canvas)
}

// meanBy returns, per processes, the mean of value over the reps of the
// runs of outage d, policy pol and w workers.
func meanBy(rows []Row, d time.Duration, pol string, w int, value func(Row) float64) plotter.XYs {
	sums := map[int][2]float64{}
	var ns []int
	for _, r := range rows {
		if r.Outage != d || r.Policy != pol || r.Workers != w {
			continue
		}
		if _, ok := sums[r.Processes]; !ok {
			ns = append(ns, r.Processes)
		}
		s := sums[r.Processes]
		sums[r.Processes] = [2]float64{s[0] + value(r), s[1] + 1}
	}
	slices.Sort(ns)
	var pts plotter.XYs
	for _, n := range ns {
		pts = append(pts, plotter.XY{X: float64(n), Y: sums[n][0] / sums[n][1]})
	}
	return pts
}

// drawTimeline draws the requests per second of the timeline's run, a
// panel per policy: all that reached the level, and the 429s.
func drawTimeline(path string, bins []timelineRow) error {
	if len(bins) == 0 {
		return fmt.Errorf("fleetsim: no timeline to draw")
	}
	var pols []string
	for _, pol := range policyOrder {
		if slices.ContainsFunc(bins, func(b timelineRow) bool { return b.Policy == pol }) {
			pols = append(pols, pol)
		}
	}
	const width, height = 7 * vg.Inch, 4 * vg.Inch
	canvas := vgimg.NewWith(vgimg.UseWH(width*vg.Length(len(pols)), height), vgimg.UseDPI(90))
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: 1, Cols: len(pols), PadX: vg.Points(14),
		PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	for i, pol := range pols {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s (processes x workers x outage: %s)", policyNames[pol], bins[0].Run)
		p.X.Label.Text = "seconds from the outage's start"
		p.Y.Label.Text = "requests per second"
		p.Add(plotter.NewGrid())
		var all, tooMany plotter.XYs
		for _, b := range bins {
			if b.Policy != pol {
				continue
			}
			const perSecond = 10 // bins of 100ms
			all = append(all, plotter.XY{X: b.At.Seconds(), Y: float64(b.Arrived) * perSecond})
			tooMany = append(tooMany, plotter.XY{X: b.At.Seconds(), Y: float64(b.TooMany) * perSecond})
		}
		for _, s := range []struct {
			xy    plotter.XYs
			name  string
			color color.Color
		}{{all, "all requests", color.Black}, {tooMany, "answered 429", policyColours["none"]}} {
			l, err := plotter.NewLine(s.xy)
			if err != nil {
				return err
			}
			l.Color = s.color
			p.Add(l)
			p.Legend.Add(s.name, l)
		}
		p.Legend.Top = true
		p.Draw(tiles.At(dc, i, 0))
	}
	return figure.WritePNG(path, canvas)
}
