package main

import (
	"bufio"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// scrape is one read of the manager's /metrics: each sample by its series
// (name{labels}, as the text format writes it).
type scrape struct {
	at     time.Time
	series map[string]float64
}

// scrapeOnce reads url's metrics.
func scrapeOnce(c *http.Client, url string) (scrape, error) {
	resp, err := c.Get(url)
	if err != nil {
		return scrape{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scrape{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(bufio.NewScanner(resp.Body), time.Now())
}

// parseMetrics reads the Prometheus text format's samples.
func parseMetrics(sc *bufio.Scanner, at time.Time) (scrape, error) {
	s := scrape{at: at, series: make(map[string]float64)}
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		i := strings.LastIndexByte(text, ' ')
		if i < 0 {
			return scrape{}, fmt.Errorf("metrics: line %q has no value", text)
		}
		v, err := strconv.ParseFloat(text[i+1:], 64)
		if err != nil {
			return scrape{}, fmt.Errorf("metrics: line %q: %w", text, err)
		}
		s.series[text[:i]] = v
	}
	return s, sc.Err()
}

// get returns the value of a series, 0 when absent.
func (s scrape) get(series string) float64 { return s.series[series] }

// sum returns the sum of the series of metric name whose labels hold
// each of the label pairs given (as `key="value"`).
func (s scrape) sum(name string, labels ...string) float64 {
	var total float64
	for k, v := range s.series {
		if metricName(k) != name || !hasLabels(k, labels) {
			continue
		}
		total += v
	}
	return total
}

// has reports whether a series of metric name exists.
func (s scrape) has(name string) bool {
	for k := range s.series {
		if metricName(k) == name {
			return true
		}
	}
	return false
}

func metricName(series string) string {
	name, _, _ := strings.Cut(series, "{")
	return name
}

func hasLabels(series string, labels []string) bool {
	for _, l := range labels {
		if !strings.Contains(series, l) {
			return false
		}
	}
	return true
}

// moved returns, for each counter family (a name ending in _total, or a
// histogram's _count) of the prefixes given, the change of its sum from a
// to b, those that changed, by name.
func moved(a, b scrape, prefixes ...string) []delta {
	sums := func(s scrape) map[string]float64 {
		m := make(map[string]float64)
		for k, v := range s.series {
			name := metricName(k)
			if !strings.HasSuffix(name, "_total") || !hasPrefix(name, prefixes) {
				continue
			}
			m[name] += v
		}
		return m
	}
	sa, sb := sums(a), sums(b)
	var out []delta
	for name, vb := range sb {
		if d := vb - sa[name]; d != 0 {
			out = append(out, delta{name, d})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

type delta struct {
	name string
	by   float64
}

func hasPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
