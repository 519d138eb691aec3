package fleetsim

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/kuberetry/retry/lab/internal/apfsim"
)

// timelineRow is one bin of one run (Run: PROCESSESxWORKERSxOUTAGE): its
// requests by what the level did, at At from the outage's start.
type timelineRow struct {
	Run, Policy                 string
	At                          time.Duration
	Arrived, OK, TooMany, Reset int64
}

// timelineOf returns res's bins from 1s before the outage to 5s after it.
func timelineOf(run, policy string, res *apfsim.Result) []timelineRow {
	var out []timelineRow
	s := res.Stats
	for i := range s.Bins() {
		at := time.Duration(i)*s.Bin() - res.OutageStart
		if at < -time.Second || at > res.OutageEnd-res.OutageStart+5*time.Second {
			continue
		}
		a, o, t, r := s.Count(i)
		out = append(out, timelineRow{run, policy, at, a, o, t, r})
	}
	return out
}

var timelineHeader = []string{"run", "policy", "t_s", "arrived", "ok", "too_many", "reset"}

func writeTimeline(path string, rows []timelineRow) error {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(timelineHeader)
	for _, r := range rows {
		_ = w.Write([]string{r.Run, r.Policy, strconv.FormatFloat(r.At.Seconds(), 'f', 3, 64),
			strconv.FormatInt(r.Arrived, 10), strconv.FormatInt(r.OK, 10),
			strconv.FormatInt(r.TooMany, 10), strconv.FormatInt(r.Reset, 10)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func readTimeline(path string) ([]timelineRow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("fleetsim: %s is empty, not even a header", path)
	}
	var out []timelineRow
	for n, rec := range recs[1:] {
		if len(rec) != len(timelineHeader) {
			return nil, fmt.Errorf("fleetsim: %s line %d: %d columns, want %d", path, n+2, len(rec), len(timelineHeader))
		}
		p := parser{rec: rec}
		out = append(out, timelineRow{rec[0], rec[1], time.Duration(p.float(2) * float64(time.Second)),
			int64(p.int(3)), int64(p.int(4)), int64(p.int(5)), int64(p.int(6))})
		if p.err != nil {
			return nil, fmt.Errorf("fleetsim: %s line %d: %w", path, n+2, p.err)
		}
	}
	return out, nil
}
