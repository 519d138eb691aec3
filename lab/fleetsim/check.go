package fleetsim

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RealRun is one fleet run on the real apiserver, from make fleet's
// fleet-apiserver.csv: its figures by name ("requests in outage", "429s
// 2s after", "last worker back s", ...).
type RealRun struct {
	QueueLength, Run int
	Policy           string
	Figures          map[string]string
}

// ReadReal reads fleet-apiserver.csv (queue_length, run, policy, figure,
// second, value), leaving out the per-second figures.
func ReadReal(r io.Reader) ([]RealRun, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("fleetsim: not make fleet's CSV: empty")
	}
	if strings.Join(recs[0], ",") != "queue_length,run,policy,figure,second,value" {
		return nil, fmt.Errorf("fleetsim: not make fleet's CSV: header %q", recs[0])
	}
	var runs []RealRun
	for n, rec := range recs[1:] {
		q, err1 := strconv.Atoi(rec[0])
		run, err2 := strconv.Atoi(rec[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("fleetsim: line %d: queue length %q, run %q", n+2, rec[0], rec[1])
		}
		if rec[4] != "" {
			continue
		}
		i := slices.IndexFunc(runs, func(r RealRun) bool { return r.QueueLength == q && r.Run == run && r.Policy == rec[2] })
		if i < 0 {
			runs = append(runs, RealRun{QueueLength: q, Run: run, Policy: rec[2], Figures: map[string]string{}})
			i = len(runs) - 1
		}
		runs[i].Figures[rec[3]] = rec[5]
	}
	return runs, nil
}

// checkFigures are the figures both make fleet and the simulation give,
// the simulation's from a Row.
var checkFigures = []struct {
	real, name string
	sim        func(Row) string
}{
	{"requests in outage", "requests during the outage", func(r Row) string { return strconv.FormatInt(r.Summary.RequestsDuring, 10) }},
	{"probes in outage", "probes among them", func(r Row) string { return strconv.FormatUint(r.Summary.ProbesDuring, 10) }},
	{"429s before", "429s before the outage", func(r Row) string { return strconv.FormatInt(r.Summary.TooManyBefore, 10) }},
	{"429s 2s after", "429s in the 2 s after", func(r Row) string { return strconv.FormatInt(r.Summary.TooManyAfter, 10) }},
	{"429s after", "429s after, all", func(r Row) string { return strconv.FormatInt(r.Summary.TooManyLater, 10) }},
	{"max Retry-After s", "largest Retry-After, s", func(r Row) string { return strconv.FormatInt(r.Summary.MaxRetryAfter, 10) }},
	{"last worker back s", "last worker back, s", func(r Row) string {
		if r.Summary.NotBack > 0 {
			return "not all"
		}
		return strconv.FormatFloat(r.Summary.BackMax.Seconds(), 'f', 2, 64)
	}},
}

// WriteCheck writes a Markdown table per queue length: each figure of
// the real runs of 48 x 4 through a 5s outage beside the simulation's,
// for each pair of policies (real name, simulation's).
func WriteCheck(w io.Writer, real []RealRun, rows []Row, pairs [][2]string) error {
	var qs []int
	for _, r := range real {
		if !slices.Contains(qs, r.QueueLength) {
			qs = append(qs, r.QueueLength)
		}
	}
	for _, q := range qs {
		fmt.Fprintf(w, "\nQueues of %d:\n\n| figure | policy | real apiserver, each run | simulation, each run |\n| --- | --- | --- | --- |\n", q)
		for _, f := range checkFigures {
			for _, pair := range pairs {
				var rv, sv []string
				for _, r := range real {
					if r.QueueLength == q && r.Policy == pair[0] {
						if v, ok := r.Figures[f.real]; ok {
							if v == "" {
								v = "not all"
							}
							rv = append(rv, v)
						}
					}
				}
				for _, r := range rows {
					if r.Processes == 48 && r.Workers == 4 && r.Outage == 5*time.Second && r.QueueLength == q && r.Policy == pair[1] {
						sv = append(sv, f.sim(r))
					}
				}
				if len(rv) == 0 && len(sv) == 0 {
					continue
				}
				if _, err := fmt.Fprintf(w, "| %s | %s | %s | %s |\n", f.name, pair[0], strings.Join(rv, ", "), strings.Join(sv, ", ")); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
