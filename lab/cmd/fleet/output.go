package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// back formats when the last worker was back.
func (f *fleet) back() string {
	if !f.fig.AllBack {
		return "never"
	}
	return f.fig.Back.Round(10 * time.Millisecond).String()
}

// rejections formats the level's rejections by reason.
func (f *fleet) rejections() string {
	if len(f.rejected) == 0 {
		return "0"
	}
	var parts []string
	for reason, n := range f.rejected {
		parts = append(parts, fmt.Sprintf("%s %.0f", reason, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// summary is a line of progress on a fleet's run.
func (f *fleet) summary() string {
	return fmt.Sprintf("%d requests in the outage (%d probes), %d 429s in the %v after, last worker back %s, %d lost writes, "+
		"the level rejected %s and dispatched %.0f; load %s",
		f.fig.OutageRequests, f.fig.Probes, f.fig.TooManyAfter, afterWindow, f.back(), f.fig.Lost, f.rejections(), f.dispatched, f.load)
}

// baselineOf returns the fleet without a budget of f's run and queue
// length, or nil.
func baselineOf(fleets []*fleet, f *fleet) *fleet {
	for _, b := range fleets {
		if b.policy.budget == nil && b.run == f.run && b.queueLength == f.queueLength {
			return b
		}
	}
	return nil
}

// ratio returns f's figure over its baseline's, formatted, or "-".
func ratio(fleets []*fleet, f *fleet, figure func(*fleet) int) string {
	b := baselineOf(fleets, f)
	if b == nil || b == f || figure(b) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3fx", float64(figure(f))/float64(figure(b)))
}

func outageRequests(f *fleet) int { return f.fig.OutageRequests }
func tooManyAfter(f *fleet) int   { return f.fig.TooManyAfter }

// writeTable writes a line per fleet run.
func writeTable(w io.Writer, fleets []*fleet) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "queue length\trun\tpolicy\tload\trequests/s healthy\trequests in outage\tvs no budget\tprobes\t"+
		"429s before\t429s 2s after\tvs no budget\t429s after\tmax Retry-After\tlast worker back\tlost writes\tlevel rejected\tdispatched\t")
	for _, f := range fleets {
		probes := "-"
		if f.policy.budget != nil {
			probes = strconv.FormatUint(f.fig.Probes, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%.0f\t%d\t%s\t%s\t%d\t%d\t%s\t%d\t%ds\t%s\t%d\t%s\t%.0f\t\n",
			f.queueLength, f.run, f.policy.name, f.load, f.fig.HealthyRate, f.fig.OutageRequests, ratio(fleets, f, outageRequests), probes,
			f.fig.TooManyBefore, f.fig.TooManyAfter, ratio(fleets, f, tooManyAfter), f.fig.TooManyLater, f.fig.MaxRetryAfter,
			f.back(), f.fig.Lost, f.rejections(), f.dispatched)
	}
	return tw.Flush()
}

// writeSeconds writes each fleet run's requests and 429s per second, from
// the healthy phase to the run's end (second 0 is the outage's first).
func writeSeconds(w io.Writer, fleets []*fleet) {
	fmt.Fprintln(w, "requests sent / 429s answered in each second from the outage's start (0 its first second)")
	for _, f := range fleets {
		var reqs, tooMany []string
		for _, s := range f.fig.Seconds {
			reqs = append(reqs, fmt.Sprintf("%d:%d", s.At, s.Requests))
			tooMany = append(tooMany, strconv.Itoa(s.TooMany))
		}
		fmt.Fprintf(w, "queue length %d, run %d, %s\n  requests: %s\n  429s:     %s\n",
			f.queueLength, f.run, f.policy.name, strings.Join(reqs, " "), strings.Join(tooMany, " "))
	}
}

// csvHeader is fleet-apiserver.csv's header: a row per figure of a fleet
// run, the per-second ones with their second (from the outage's start),
// the others with none.
var csvHeader = []string{"queue_length", "run", "policy", "figure", "second", "value"}

// The figures of the CSV.
const (
	figRequests       = "requests"
	figTooMany        = "429s"
	figHealthyRate    = "requests/s healthy"
	figOutageRequests = "requests in outage"
	figProbes         = "probes in outage"
	figTooManyBefore  = "429s before"
	figTooManyAfter   = "429s 2s after"
	figTooManyLater   = "429s after"
	figRetryAfter     = "max Retry-After s"
	figBack           = "last worker back s"
	figLost           = "lost writes"
	figDispatched     = "level dispatched"
	figRejected       = "level rejected "
	figLoad           = "load"
)

// writeCSV writes the fleets' figures to path.
func writeCSV(path string, fleets []*fleet) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	defer file.Close()
	cw := csv.NewWriter(file)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, f := range fleets {
		row := func(figure, second, value string) {
			_ = cw.Write([]string{strconv.Itoa(int(f.queueLength)), strconv.Itoa(f.run), f.policy.name, figure, second, value})
		}
		itoa := strconv.Itoa
		row(figLoad, "", f.load)
		row(figHealthyRate, "", strconv.FormatFloat(f.fig.HealthyRate, 'f', 1, 64))
		row(figOutageRequests, "", itoa(f.fig.OutageRequests))
		if f.policy.budget != nil {
			row(figProbes, "", strconv.FormatUint(f.fig.Probes, 10))
		}
		row(figTooManyBefore, "", itoa(f.fig.TooManyBefore))
		row(figTooManyAfter, "", itoa(f.fig.TooManyAfter))
		row(figTooManyLater, "", itoa(f.fig.TooManyLater))
		row(figRetryAfter, "", itoa(f.fig.MaxRetryAfter))
		back := ""
		if f.fig.AllBack {
			back = strconv.FormatFloat(f.fig.Back.Seconds(), 'f', 3, 64)
		}
		row(figBack, "", back)
		row(figLost, "", itoa(f.fig.Lost))
		row(figDispatched, "", strconv.FormatFloat(f.dispatched, 'f', 0, 64))
		reasons := make([]string, 0, len(f.rejected))
		for reason := range f.rejected {
			reasons = append(reasons, reason)
		}
		slices.Sort(reasons)
		for _, reason := range reasons {
			row(figRejected+reason, "", strconv.FormatFloat(f.rejected[reason], 'f', 0, 64))
		}
		for _, s := range f.fig.Seconds {
			row(figRequests, itoa(s.At), itoa(s.Requests))
			row(figTooMany, itoa(s.At), itoa(s.TooMany))
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return file.Close()
}
