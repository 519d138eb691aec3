package main

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"os"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/kuberetry/retry/integration/testenv/outage"
	"github.com/kuberetry/retry/lab/internal/figure"
)

// csvHeader names the columns of outages.csv, one row per run.
var csvHeader = []string{
	"outage_s", "caller", "policy", "requests_outage", "vs_no_budget", "connections_outage", "back_ms",
	"goodput_before_per_s", "goodput_after_per_s", "goodput_ratio",
	"calls", "failed_calls", "retries", "refused", "refused_after", "held", "probes",
}

func writeCSV(path string, rs []*outage.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(csvHeader)
	for _, r := range rs {
		back := ""
		if d, ok := r.Recovery(); ok {
			back = strconv.FormatInt(d.Milliseconds(), 10)
		}
		before, after := r.Goodput()
		failed := 0
		for _, c := range r.Calls {
			if c.Err != nil {
				failed++
			}
		}
		var budget [5]string
		if r.HasBudget {
			for i, n := range r.BudgetFigures() {
				budget[i] = strconv.FormatUint(n, 10)
			}
		}
		row := []string{
			strconv.FormatFloat(r.Sched.Outage.Seconds(), 'f', 1, 64), r.Caller.Short(), r.Policy, strconv.Itoa(r.OutageRequests()),
			strconv.FormatFloat(outage.Ratio(rs, r), 'f', 3, 64), strconv.FormatInt(r.OutageConnections(), 10), back,
			strconv.FormatFloat(before, 'f', 2, 64), strconv.FormatFloat(after, 'f', 2, 64), strconv.FormatFloat(r.GoodputRatio(), 'f', 3, 64),
			strconv.Itoa(len(r.Calls)), strconv.Itoa(failed),
		}
		row = append(row, budget[:]...)
		w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// colours tell the policies apart, in their order: Okabe and Ito's
// palette for colour-blind readers; with peers.All(), NewBudget() in
// black.
var colours = []color.Color{
	color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff},
	color.RGBA{R: 0x56, G: 0xb4, B: 0xe9, A: 0xff},
	color.RGBA{R: 0xe6, G: 0x9f, A: 0xff},
	color.RGBA{R: 0x00, G: 0x9e, B: 0x73, A: 0xff},
	color.RGBA{R: 0xcc, G: 0x79, B: 0xa7, A: 0xff},
	color.RGBA{A: 0xff},
}

// panel is one of the plot's three bar charts.
type panel struct {
	title, ylabel string
	value         func(r *outage.Result) (float64, bool)
}

var panels = []panel{
	{"Requests during the outage", "requests on the wire", func(r *outage.Result) (float64, bool) {
		return float64(r.OutageRequests()), true
	}},
	{"Every worker back, after the outage", "seconds", func(r *outage.Result) (float64, bool) {
		d, ok := r.Recovery()
		return d.Seconds(), ok
	}},
	{"Goodput, 5s after the outage / 3s before", "successful calls per second, after / before", func(r *outage.Result) (float64, bool) {
		return r.GoodputRatio(), true
	}},
}

// drawPlot draws the three panels side by side, a group of bars per
// outage length and caller, a bar per policy, into one PNG.
func drawPlot(path string, policies []outage.Policy, rs []*outage.Result) error {
	if len(policies) > len(colours) {
		return fmt.Errorf("%d policies but colours for %d", len(policies), len(colours))
	}
	const width = 24 * vg.Inch
	const height = 5.5 * vg.Inch
	canvas := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(100))
	dc := draw.New(canvas)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Points(12), PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	barWidth := vg.Points(5)
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.Y.Label.Text = pn.ylabel
		p.X.Label.Text = "outage length, caller"
		p.Add(plotter.NewGrid())
		groups := groupsOf(rs)
		names := make([]string, len(groups))
		for j, g := range groups {
			names[j] = fmt.Sprintf("%.1fs (%s)", g.length.Seconds(), g.caller.Short())
		}
		p.NominalX(names...)
		for k, pol := range policies {
			vals := make(plotter.Values, len(groups))
			for j, g := range groups {
				for _, r := range rs {
					if r.Caller == g.caller && r.Sched.Outage == g.length && r.Policy == pol.Name {
						if v, ok := pn.value(r); ok {
							vals[j] = v
						}
					}
				}
			}
			bars, err := plotter.NewBarChart(vals, barWidth)
			if err != nil {
				return err
			}
			bars.Color = colours[k]
			bars.LineStyle.Width = vg.Points(0.5)
			bars.Offset = barWidth * vg.Length(float64(k)-float64(len(policies)-1)/2)
			p.Add(bars)
			if i == 0 {
				p.Legend.Add(pol.Name, bars)
			}
		}
		p.Y.Min = 0
		p.Y.Max *= 1.1
		if i == 0 {
			// Room above the bars for the legend.
			p.Y.Max *= 1.5
			p.Legend.Top, p.Legend.Left = true, true
			p.Legend.XOffs, p.Legend.YOffs = vg.Points(6), vg.Points(-4)
			p.Legend.ThumbnailWidth = vg.Points(12)
		}
		p.Draw(tiles.At(dc, i, 0))
	}
	return figure.WritePNG(path, canvas)
}

// group is a group of bars: the runs of one outage length and caller.
type group struct {
	length time.Duration
	caller outage.Caller
}

// groupsOf returns the groups of rs in the order their runs came.
func groupsOf(rs []*outage.Result) []group {
	var gs []group
	for _, r := range rs {
		g := group{r.Sched.Outage, r.Caller}
		if !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	return gs
}
