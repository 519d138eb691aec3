// Command timeline draws what NewBudget() does over time: the requests
// per 100ms on the wire, with and without the budget, and its holds,
// through one outage and one partial failure (docs/budget.md's picture).
//
// Each scenario runs two controllers at once, one without a budget and
// one with NewBudget() on its rest.Config (cfg.Wrap(budget.WrapTransport)),
// each with its own client, connections and objects. Every worker writes
// an object of its own from the object it stored last (a PUT alone), with
// Update through a typed clientset inside its own loop
// (OnErrorWithContext(IsTransient), 10 attempts 10ms apart), and calls
// again 100ms after the call returns. The requests are recorded on the
// wire below the budget (a request it holds is recorded when it goes, one
// it refuses never), and the holds from the budget's OnHold events.
//
//   - outage: 16 workers write ConfigMaps through a TCP proxy of their
//     controller's own; after a warm-up, 2s healthy, then the proxy resets
//     every connection and each new one at once for 5s, then 3s healthy.
//   - webhook: a validating webhook on the CREATE and UPDATE of the
//     labelled Secrets, served by this process, answers 500 for 4s (so
//     the apiserver answers 500 to those writes) while 4 workers per
//     controller write such Secrets and 12 write ConfigMaps.
//
// It prints the figures, writes budget-timeline.csv and budget-timeline.png
// to the repository's docs/ directory (or --out), and exits non-zero when
// the budget sent as many requests to what failed as no budget did,
// reported no hold, left one unended, or held a scope that did not fail.
// --quick runs a smaller, shorter version (for the tests).
//
// It starts etcd and a kube-apiserver in process, on loopback.
//
//	go run ./cmd/timeline [--out DIR] [--quick]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/faultproxy"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/lab/internal/cluster"
)

func main() {
	cluster.Main("timeline", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Stdout, cluster.NewProgress(os.Stderr))
	})
}

// shape is the size and the phases of a run.
type shape struct {
	// warmup runs before the timeline starts; before is the healthy
	// time on the timeline before the failure, after the time after it.
	warmup, before, after time.Duration
	// outage and webhook are how long each scenario's failure lasts.
	outage, webhook time.Duration
	// workers write ConfigMaps in the outage; healthy write ConfigMaps
	// and failing write the webhook's Secrets in the webhook scenario.
	workers, healthy, failing int
}

var (
	full  = shape{warmup: 2 * time.Second, before: 2 * time.Second, after: 3 * time.Second, outage: 5 * time.Second, webhook: 4 * time.Second, workers: 16, healthy: 12, failing: 4}
	quick = shape{warmup: time.Second, before: time.Second, after: 1500 * time.Millisecond, outage: 2 * time.Second, webhook: 2 * time.Second, workers: 4, healthy: 2, failing: 2}
)

// The workers' loop and pause.
var (
	loopBackoff = retry.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 1.0, Jitter: 0.1}
	pause       = 100 * time.Millisecond
)

// The policies, in the order of each result's controllers.
const (
	noBudget   = "no budget"
	withBudget = "NewBudget()"
)

var policies = []string{noBudget, withBudget}

// The kinds of request on the wire (classify), and of worker.
const (
	configMaps    = "configmaps"
	secretWrites  = "writes of secrets"
	secretReads   = "reads of secrets"
	otherRequests = "other"
	secrets       = "secrets"
)

// classify names a request's kind.
func classify(req *http.Request) string {
	switch p := req.URL.Path; {
	case strings.Contains(p, "/secrets"):
		if req.Method == http.MethodGet || req.Method == http.MethodHead {
			return secretReads
		}
		return secretWrites
	case strings.Contains(p, "/configmaps"):
		return configMaps
	}
	return otherRequests
}

func run(ctx context.Context, args []string, stdout io.Writer, p *cluster.Progress) error {
	flags := flag.NewFlagSet("timeline", flag.ContinueOnError)
	out := flags.String("out", "", "directory for budget-timeline.csv and budget-timeline.png (default: the repository's docs/)")
	small := flags.Bool("quick", false, "a smaller, shorter run (for the tests)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	sh := full
	if *small {
		sh = quick
	}
	dir := *out
	if dir == "" {
		root, err := cluster.RepoRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "docs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	c, err := cluster.Open(ctx, "", 0, "timeline-", p)
	if err != nil {
		return err
	}
	defer c.Close()
	env := &env{cfg: c.Config, client: c.Client, ns: c.Namespace, sh: sh, p: p}

	p.Line("outage: %d workers per controller, the server unreachable for %v", sh.workers, sh.outage)
	outage, err := env.outage(ctx)
	if err != nil {
		return err
	}
	p.Line("webhook: %d + %d workers per controller, the webhook failing for %v", sh.healthy, sh.failing, sh.webhook)
	hook, err := env.webhook(ctx)
	if err != nil {
		return err
	}
	results := []*result{outage, hook}

	fmt.Fprintf(stdout, "On %s; requests on the wire below the budget, per controller (no budget, NewBudget()), "+
		"each worker writing an object of its own with Update (a PUT) inside OnErrorWithContext(IsTransient), "+
		"10 attempts 10ms apart, again %v after each call\n", c.Where, pause)
	for _, r := range results {
		r.print(stdout)
	}
	csvPath, pngPath := filepath.Join(dir, "budget-timeline.csv"), filepath.Join(dir, "budget-timeline.png")
	if err := writeCSV(csvPath, results); err != nil {
		return err
	}
	if err := drawTimeline(pngPath, results); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s and %s\n", csvPath, pngPath)
	var missed []string
	for _, r := range results {
		missed = append(missed, r.verdicts()...)
	}
	if len(missed) > 0 {
		return errors.New(strings.Join(missed, "\n"))
	}
	return nil
}

// env is where the scenarios run.
type env struct {
	cfg    *rest.Config
	client kubernetes.Interface
	ns     string
	sh     shape
	p      *cluster.Progress
}

// controller is one policy's controller in a scenario.
type controller struct {
	policy string
	budget *retry.Budget // nil without one
	wire   *wire
	holds  *holdLog
	calls  *calls
	client kubernetes.Interface
}

// newController returns a controller of policy whose client reaches the
// server at host (the server's own when empty): no client-side rate
// limit, a dialer of its own (so client-go's transport cache gives it a
// transport and connections of its own), the wire recorder below the
// budget.
func (e *env) newController(policy, host string) (*controller, error) {
	c := &controller{policy: policy, wire: &wire{classify: classify}, holds: &holdLog{}, calls: &calls{}}
	cfg := rest.CopyConfig(e.cfg)
	cfg.QPS, cfg.Burst = 1000, 10000
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = d.DialContext
	if host != "" {
		cfg.Host = host
	}
	cfg.Wrap(c.wire.wrap)
	if policy == withBudget {
		c.budget = retry.NewBudget()
		watchHolds(c.budget, c.holds)
		cfg.Wrap(c.budget.WrapTransport)
	}
	var err error
	c.client, err = kubernetes.NewForConfig(cfg)
	return c, err
}

// job is one worker's call and the kind of object it writes.
type job struct {
	what string
	call func(context.Context) error
}

// work runs each job in a worker of its own until ctx ends: the call
// inside the workers' loop, again pause after it returns.
func (c *controller) work(ctx context.Context, wg *sync.WaitGroup, jobs []job) {
	for w, j := range jobs {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := retry.OnErrorWithContext(ctx, loopBackoff, retry.IsTransient, j.call)
				if ctx.Err() != nil {
					return
				}
				c.calls.add(w, j.what, time.Now(), err == nil)
				poll.Sleep(ctx, pause)
			}
		})
	}
}

// configMapJob creates a ConfigMap named name and returns the job that
// writes it through c, from the object it stored last.
func (e *env) configMapJob(ctx context.Context, c *controller, name string) (job, error) {
	stored, err := e.client.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return job{}, fmt.Errorf("create configmap: %w", err)
	}
	cms := c.client.CoreV1().ConfigMaps(e.ns)
	n := 0
	return job{what: configMaps, call: func(ctx context.Context) error {
		n++
		got, err := retry.Update(ctx, retry.DefaultRetry, cms, stored, func(cm *corev1.ConfigMap) error {
			cm.Data = map[string]string{"n": strconv.Itoa(n)}
			return nil
		})
		if err == nil {
			stored = got
		}
		return err
	}}, nil
}

// secretJob creates a Secret the webhook covers, named name, and returns
// the job that writes it through c, from the object it stored last.
func (e *env) secretJob(ctx context.Context, c *controller, name string) (job, error) {
	stored, err := e.client.CoreV1().Secrets(e.ns).Create(ctx, coveredSecret(name), metav1.CreateOptions{})
	if err != nil {
		return job{}, fmt.Errorf("create secret: %w", err)
	}
	ss := c.client.CoreV1().Secrets(e.ns)
	n := 0
	return job{what: secrets, call: func(ctx context.Context) error {
		n++
		got, err := retry.Update(ctx, retry.DefaultRetry, ss, stored, func(s *corev1.Secret) error {
			s.Data = map[string][]byte{"n": []byte(strconv.Itoa(n))}
			return nil
		})
		if err == nil {
			stored = got
		}
		return err
	}}, nil
}

// scenario is what a result ran.
type scenario struct {
	name    string // outage or webhook
	title   string // the plot panel's
	failure string // what failed
	// failing is the kind of request sent to what failed, healthy the
	// kind sent to what did not (empty: none); failingCalls the kind of
	// worker whose calls failed.
	failing, healthy, failingCalls string
}

// result is what a scenario recorded.
type result struct {
	scenario
	start, failStart, failEnd, end time.Time
	ctrls                          []*controller // in the order of policies
}

// outage runs the outage scenario.
func (e *env) outage(ctx context.Context) (*result, error) {
	u, err := url.Parse(e.cfg.Host)
	if err != nil {
		return nil, err
	}
	r := &result{scenario: scenario{
		name: "outage", failing: configMaps, failingCalls: configMaps,
		title:   fmt.Sprintf("The whole server down: every connection reset for %v (%d workers per controller)", e.sh.outage, e.sh.workers),
		failure: "every connection reset",
	}}
	var proxies []*faultproxy.Proxy
	defer func() {
		for _, px := range proxies {
			px.Close()
		}
	}()
	jobs := make([][]job, len(policies))
	for i, pol := range policies {
		px, err := faultproxy.New(u.Host)
		if err != nil {
			return nil, err
		}
		proxies = append(proxies, px)
		c, err := e.newController(pol, "https://"+px.Addr())
		if err != nil {
			return nil, err
		}
		r.ctrls = append(r.ctrls, c)
		for w := range e.sh.workers {
			j, err := e.configMapJob(ctx, c, fmt.Sprintf("outage-%d-w%02d", i, w))
			if err != nil {
				return nil, err
			}
			jobs[i] = append(jobs[i], j)
		}
	}
	err = e.timeline(ctx, r, jobs, e.sh.outage, func(on bool) {
		for _, px := range proxies {
			px.SetOutage(on)
		}
	})
	return r, err
}

// webhook runs the webhook scenario.
func (e *env) webhook(ctx context.Context) (_ *result, err error) {
	hook, err := startWebhook(ctx, e.client, e.ns)
	if err != nil {
		return nil, err
	}
	defer func() {
		// The run's context may have ended: delete the registration
		// anyway, as the server outlives the scenario.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, hook.stop(stopCtx, e.client))
	}()
	r := &result{scenario: scenario{
		name: "webhook", failing: secretWrites, healthy: configMaps, failingCalls: secrets,
		title: fmt.Sprintf("A webhook failing the writes of Secrets for %v (%d Secret and %d ConfigMap workers per controller)",
			e.sh.webhook, e.sh.failing, e.sh.healthy),
		failure: "the webhook answers 500",
	}}
	jobs := make([][]job, len(policies))
	for i, pol := range policies {
		c, err := e.newController(pol, "")
		if err != nil {
			return nil, err
		}
		r.ctrls = append(r.ctrls, c)
		for w := range e.sh.failing {
			j, err := e.secretJob(ctx, c, fmt.Sprintf("webhook-%d-s%02d", i, w))
			if err != nil {
				return nil, err
			}
			jobs[i] = append(jobs[i], j)
		}
		for w := range e.sh.healthy {
			j, err := e.configMapJob(ctx, c, fmt.Sprintf("webhook-%d-c%02d", i, w))
			if err != nil {
				return nil, err
			}
			jobs[i] = append(jobs[i], j)
		}
	}
	err = e.timeline(ctx, r, jobs, e.sh.webhook, func(on bool) { hook.failing.Store(on) })
	return r, err
}

// timeline runs r's controllers' jobs through a warm-up, the healthy time
// before, length of failure (fail(true), then fail(false)) and the
// healthy time after, and marks r's times.
func (e *env) timeline(ctx context.Context, r *result, jobs [][]job, length time.Duration, fail func(bool)) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i, c := range r.ctrls {
		c.work(runCtx, &wg, jobs[i])
	}
	poll.Sleep(ctx, e.sh.warmup)
	r.start = time.Now()
	poll.Sleep(ctx, e.sh.before)
	r.failStart = time.Now()
	fail(true)
	poll.Sleep(ctx, length)
	r.failEnd = time.Now()
	fail(false)
	poll.Sleep(ctx, e.sh.after)
	r.end = time.Now()
	stop()
	wg.Wait()
	return ctx.Err()
}

// buckets is the number of buckets on r's timeline.
func (r *result) buckets() int { return int(r.end.Sub(r.start) / bucket) }

// since returns t in seconds from the timeline's start.
func (r *result) since(t time.Time) float64 { return t.Sub(r.start).Seconds() }

// print writes r's figures.
func (r *result) print(w io.Writer) {
	fmt.Fprintf(w, "\n%s: %s from %.1fs to %.1fs of a %.1fs timeline\n", r.name, r.failure, r.since(r.failStart), r.since(r.failEnd), r.since(r.end))
	for _, c := range r.ctrls {
		fmt.Fprintf(w, "  %-12s %s during the failure: %d", c.policy, r.failing, c.wire.between(r.failing, r.failStart, r.failEnd))
		if r.healthy != "" {
			fmt.Fprintf(w, "; %s calls that succeeded during it: %d", r.healthy, c.calls.succeeded(r.healthy, r.failStart, r.failEnd))
		}
		if d, ok := c.calls.back(r.failingCalls, r.failEnd); ok {
			fmt.Fprintf(w, "; every %s worker back %.2fs after the end", r.failingCalls, d.Seconds())
		} else {
			fmt.Fprintf(w, "; not every %s worker back", r.failingCalls)
		}
		fmt.Fprintln(w)
		for _, h := range c.holds.all() {
			end := "not ended"
			if !h.End.IsZero() {
				end = fmt.Sprintf("to %.2fs (%.2fs after the failure's end), %d probes, %d waited", r.since(h.End), h.End.Sub(r.failEnd).Seconds(), h.Probes, h.Waited)
			}
			fmt.Fprintf(w, "    hold of %s from %.2fs (%.2fs after the failure's start) %s; started by %s\n",
				scopeName(h.Scope), r.since(h.Start), h.Start.Sub(r.failStart).Seconds(), end, sanitize(h.Err))
		}
	}
}

// verdicts returns what r's budget missed: fewer requests to what failed
// than without a budget, and (where the budget reports its holds) holds
// of what failed only, each ended.
func (r *result) verdicts() []string {
	var missed []string
	none, ours := r.ctrls[0], r.ctrls[1]
	n0, n1 := none.wire.between(r.failing, r.failStart, r.failEnd), ours.wire.between(r.failing, r.failStart, r.failEnd)
	if n1 >= n0 {
		missed = append(missed, fmt.Sprintf("%s: NewBudget() sent %d %s requests during the failure, no budget %d", r.name, n1, r.failing, n0))
	}
	if !holdsReported {
		return missed
	}
	holds := ours.holds.all()
	if len(holds) == 0 {
		missed = append(missed, fmt.Sprintf("%s: NewBudget() reported no hold", r.name))
	}
	for _, h := range holds {
		if h.End.IsZero() {
			missed = append(missed, fmt.Sprintf("%s: the hold of %s never ended", r.name, scopeName(h.Scope)))
		}
		if r.name == "webhook" && h.Scope != secretWrites {
			missed = append(missed, fmt.Sprintf("%s: NewBudget() held %s, which did not fail", r.name, scopeName(h.Scope)))
		}
	}
	return missed
}
