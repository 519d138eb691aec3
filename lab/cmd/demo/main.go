// Command demo shows what update conflicts do to a controller's
// retry loop, against a real kube-apiserver.
//
// Many writers increment one counter in one ConfigMap, each increment a
// read-modify-write through a retry loop, as controllers sharing an object
// do. Every run is repeated with this library's DefaultRetry and
// DefaultBackoff and with client-go's, each increment written as client-go
// documents it (a Get inside RetryOnConflict), then with UpdateOnConflict
// starting from the object the writer's previous update returned (with
// DefaultRetry, DefaultBackoff, HotObjectBackoff, and HotObjectBackoff
// with each writer's own Contention), for a few writer counts; then, at each count, the writers race to create one
// ConfigMap that does not exist yet with CreateOrUpdate, each adding a key
// of its own. A table shows how many increments got through, how
// many gave up, how many conflicts they met, how many requests reached the
// server per successful increment, and what that cost in latency and wall
// time.
//
// By default it starts a kube-apiserver and etcd in process, on loopback,
// and throws them away afterwards. With --apiservers N (1 to 5) it starts
// an HA control plane in process instead: N kube-apiservers on one etcd
// prefix of a three-member etcd, behind a round-robin load balancer, each
// writer with a connection of its own, so the writers spread over the
// apiservers. With --kubeconfig, or KUBECONFIG set, it uses that cluster
// instead, in a namespace it creates and deletes.
//
//	go run ./cmd/demo [--writers 4,16,64] [--updates 10] [--apiservers N | --kubeconfig FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	cgretry "k8s.io/client-go/util/retry"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/contention"
	"github.com/kuberetry/retry/lab/internal/cluster"
)

func main() {
	cluster.Main("demo", func(ctx context.Context) error {
		return run(ctx, os.Args[1:], os.Getenv("KUBECONFIG"), os.Stdout, cluster.NewProgress(os.Stderr))
	})
}

// strategies are the retry loops compared, each with the Steps of its
// backoff (the most attempts one call may make).
var strategies = []contention.Strategy{
	{
		Name: "kuberetry DefaultRetry", Steps: retry.DefaultRetry.Steps,
		Loop: func(ctx context.Context, fn func(context.Context) error) error {
			return retry.RetryOnConflictWithContext(ctx, retry.DefaultRetry, fn)
		},
	},
	{
		Name: "kuberetry DefaultBackoff", Steps: retry.DefaultBackoff.Steps,
		Loop: func(ctx context.Context, fn func(context.Context) error) error {
			return retry.RetryOnConflictWithContext(ctx, retry.DefaultBackoff, fn)
		},
	},
	{
		Name: "client-go DefaultRetry", Steps: cgretry.DefaultRetry.Steps,
		Loop: func(ctx context.Context, fn func(context.Context) error) error {
			return cgretry.RetryOnConflict(cgretry.DefaultRetry, func() error { return fn(ctx) })
		},
	},
	{
		Name: "client-go DefaultBackoff", Steps: cgretry.DefaultBackoff.Steps,
		Loop: func(ctx context.Context, fn func(context.Context) error) error {
			return cgretry.RetryOnConflict(cgretry.DefaultBackoff, func() error { return fn(ctx) })
		},
	},
	{Name: "UpdateOnConflict DefaultRetry", Steps: retry.DefaultRetry.Steps, Update: contention.UpdateOnConflict(retry.DefaultRetry)},
	{Name: "UpdateOnConflict DefaultBackoff", Steps: retry.DefaultBackoff.Steps, Update: contention.UpdateOnConflict(retry.DefaultBackoff)},
	{Name: "UpdateOnConflict HotObjectBackoff", Steps: retry.HotObjectBackoff.Steps, Update: contention.UpdateOnConflict(retry.HotObjectBackoff)},
	{
		// Each writer a process of its own: its own Contention.
		Name: "UpdateOnConflict Hot, Contention", Steps: retry.HotObjectBackoff.Steps,
		ForWriter: func(int) contention.Strategy {
			return contention.Strategy{Update: contention.UpdateOnConflict(retry.HotObjectBackoff, retry.WithContention(retry.NewContention()))}
		},
	},
}

// raceName names the create-or-update race's rows, and raceBackoff is its
// backoff: a race on one object is a hot object.
const raceName = "CreateOrUpdate race, HotObject"

var raceBackoff = retry.HotObjectBackoff

// connectionsLine begins the line that an HA control plane's run ends
// with: the writers' connections to each kube-apiserver.
const connectionsLine = "connections per kube-apiserver (the balancer's):"

// run is the program: args are its command-line arguments, kubeconfigEnv
// the KUBECONFIG variable, the table goes to stdout and progress to p.
func run(ctx context.Context, args []string, kubeconfigEnv string, stdout io.Writer, p *cluster.Progress) error {
	flags := flag.NewFlagSet("contention", flag.ContinueOnError)
	where := cluster.AddClusterFlags(flags, kubeconfigEnv)
	writersFlag := flags.String("writers", "4,16,64", "comma-separated numbers of concurrent writers")
	updates := flags.Int("updates", 10, "increments per writer")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if err := where.Check(); err != nil {
		return err
	}
	writerCounts, err := parseCounts(*writersFlag)
	if err != nil {
		return fmt.Errorf("--writers: %w", err)
	}
	if *updates < 1 {
		return errors.New("--updates must be at least 1")
	}

	cl, err := where.Open(ctx, "kuberetry-contention-", p)
	if err != nil {
		return err
	}
	defer cl.Close()

	var sums []contention.Summary
	var problems []string
	total := len(writerCounts) * (len(strategies) + 1) // and a race per count
	for _, writers := range writerCounts {
		for _, s := range strategies {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := writers * *updates
			label := fmt.Sprintf("[%d/%d] %s, %d writers", len(sums)+1, total, s.Name, writers)
			res, err := contention.Run(ctx, s, contention.Config{
				Client:    cl.Client,
				Writer:    cl.Writer,
				Namespace: cl.Namespace,
				Name:      fmt.Sprintf("counter-%d", len(sums)),
				Writers:   writers,
				Updates:   *updates,
				Progress:  func(done int) { p.Live("%s: %d/%d updates", label, done, n) },
				Requests:  cl.Requests,
			})
			if err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			sum := contention.Summarize(res)
			p.Line("%s: %d/%d succeeded in %v", label, sum.Succeeded, n, sum.Wall.Round(time.Millisecond))
			sums = append(sums, sum)
			problems = append(problems, contention.Problems(label, s, res)...)
		}

		label := fmt.Sprintf("[%d/%d] %s, %d writers", len(sums)+1, total, raceName, writers)
		res, err := raceCreateOrUpdate(ctx, raceName, raceBackoff, contention.Config{
			Client:    cl.Client,
			Writer:    cl.Writer,
			Namespace: cl.Namespace,
			Name:      fmt.Sprintf("raced-%d", len(sums)),
			Writers:   writers,
			Requests:  cl.Requests,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		sum := contention.Summarize(res.Result)
		p.Line("%s: %d/%d succeeded in %v", label, sum.Succeeded, writers, sum.Wall.Round(time.Millisecond))
		sums = append(sums, sum)
		problems = append(problems, raceProblems(label, raceBackoff.Steps, res)...)
	}

	fmt.Fprintf(stdout, "%d increments per writer of one ConfigMap counter, on %s:\n\n", *updates, cl.Where)
	printTable(stdout, sums)
	fmt.Fprintf(stdout, "\n%s: the writers, released together, each make one CreateOrUpdate call on a ConfigMap\n"+
		"that does not exist yet, adding a key of their own; exactly one creates it.\n", raceName)
	if conns := cl.Connections(); conns != nil {
		fmt.Fprintf(stdout, "%s %v\n", connectionsLine, conns)
	}
	if len(problems) > 0 {
		return fmt.Errorf("unexpected results:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// printTable writes sums as an aligned table.
func printTable(w io.Writer, sums []contention.Summary) {
	// Numbers align right; names, padded to one width, read left-aligned.
	width := len("backoff")
	for _, s := range sums {
		width = max(width, len(s.Strategy))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\twriters\tupdates\tsucceeded\tgave up\tconflicts\tretries/update\trequests/update\tp50\tp99\twall\t\n", width, "backoff")
	for _, s := range sums {
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%s\t%v\t%v\t%v\t\n",
			width, s.Strategy, s.Writers, s.Updates, s.Succeeded, s.GaveUp, s.Conflicts, s.RetriesPerUpdate(),
			requestsPerUpdate(s), roundDuration(s.P50), roundDuration(s.P99), roundDuration(s.Wall))
	}
	tw.Flush()
}

// requestsPerUpdate formats the ConfigMap requests sent per successful
// update, "-" when nothing succeeded.
func requestsPerUpdate(s contention.Summary) string {
	if r := s.RequestsPerUpdate(); r >= 0 {
		return fmt.Sprintf("%.2f", r)
	}
	return "-"
}

// roundDuration keeps two or three significant digits.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	default:
		return d.Round(10 * time.Microsecond)
	}
}

func parseCounts(s string) ([]int, error) {
	var counts []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		counts = append(counts, n)
	}
	return counts, nil
}
