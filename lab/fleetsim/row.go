package fleetsim

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/kuberetry/retry/lab/internal/apfsim"
)

// Row is one run of the simulation, a line of docs/fleet-sim.csv.
type Row struct {
	Processes, Workers int
	Outage             time.Duration
	Policy             string
	Rep                int
	Seats, QueueLength int
	Summary            apfsim.Summary
	// Wall is how long the run took on the machine.
	Wall time.Duration
}

var header = []string{
	"processes", "workers", "outage_s", "policy", "rep", "seats", "queue_length",
	"requests_before_per_s", "requests_outage", "probes_outage", "too_many_before", "too_many_2s_after", "too_many_after", "max_retry_after_s",
	"back_p50_s", "back_p99_s", "back_max_s", "not_back", "max_queue_wait_ms", "wall_s",
}

// WriteCSV writes rows with a header line.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range rows {
		s := r.Summary
		sec := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
		if err := cw.Write([]string{
			strconv.Itoa(r.Processes), strconv.Itoa(r.Workers), sec(r.Outage), r.Policy, strconv.Itoa(r.Rep),
			strconv.Itoa(r.Seats), strconv.Itoa(r.QueueLength),
			strconv.FormatFloat(s.RequestsBefore, 'f', 1, 64), strconv.FormatInt(s.RequestsDuring, 10),
			strconv.FormatUint(s.ProbesDuring, 10), strconv.FormatInt(s.TooManyBefore, 10), strconv.FormatInt(s.TooManyAfter, 10),
			strconv.FormatInt(s.TooManyLater, 10), strconv.FormatInt(s.MaxRetryAfter, 10),
			sec(s.BackP50), sec(s.BackP99), sec(s.BackMax), strconv.Itoa(s.NotBack),
			strconv.FormatFloat(float64(s.MaxQueueWait)/float64(time.Millisecond), 'f', 1, 64), sec(r.Wall),
		}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads what WriteCSV wrote.
func ReadCSV(r io.Reader) ([]Row, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || len(recs[0]) != len(header) {
		return nil, fmt.Errorf("fleetsim: want a header of %d columns", len(header))
	}
	var rows []Row
	for n, rec := range recs[1:] {
		p := parser{rec: rec}
		row := Row{
			Processes: p.int(0), Workers: p.int(1), Outage: p.sec(2), Policy: rec[3], Rep: p.int(4),
			Seats: p.int(5), QueueLength: p.int(6), Wall: p.sec(19),
			Summary: apfsim.Summary{
				RequestsBefore: p.float(7), RequestsDuring: int64(p.int(8)), ProbesDuring: uint64(p.int(9)),
				TooManyBefore: int64(p.int(10)), TooManyAfter: int64(p.int(11)), TooManyLater: int64(p.int(12)),
				MaxRetryAfter: int64(p.int(13)), BackP50: p.sec(14), BackP99: p.sec(15), BackMax: p.sec(16),
				NotBack: p.int(17), MaxQueueWait: time.Duration(p.float(18) * float64(time.Millisecond)),
			},
		}
		if p.err != nil {
			return nil, fmt.Errorf("fleetsim: line %d: %w", n+2, p.err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

type parser struct {
	rec []string
	err error
}

func (p *parser) float(i int) float64 {
	v, err := strconv.ParseFloat(p.rec[i], 64)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("column %s: %w", header[i], err)
	}
	return v
}

func (p *parser) int(i int) int { return int(p.float(i)) }

func (p *parser) sec(i int) time.Duration { return time.Duration(p.float(i) * float64(time.Second)) }
