// Command contention shows what update conflicts do to a controller's
// retry loop, against a real kube-apiserver.
//
// Many writers increment one counter in one ConfigMap, each increment a
// read-modify-write through a retry loop, as controllers sharing an object
// do. Every run is repeated with this library's DefaultRetry and
// DefaultBackoff and with client-go's, each increment written as client-go
// documents it (a Get inside RetryOnConflict), then with UpdateOnConflict
// starting from the object the writer's previous update returned, for a
// few writer counts. A table shows how many increments got through, how
// many gave up, how many conflicts they met, how many requests reached the
// server per successful increment, and what that cost in latency and wall
// time.
//
// By default it starts a kube-apiserver and etcd in process, on loopback,
// and throws them away afterwards. With --kubeconfig, or KUBECONFIG set, it
// uses that cluster instead, in a namespace it creates and deletes.
//
//	go run ./cmd/contention [--writers 4,16,64] [--updates 10] [--kubeconfig FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cgretry "k8s.io/client-go/util/retry"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/internal/contention"
	"github.com/kuberetry/retry/integration/internal/reqcount"
	"github.com/kuberetry/retry/integration/internal/testserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv("KUBECONFIG"), os.Stdout, newProgress(os.Stderr)); err != nil {
		fmt.Fprintln(os.Stderr, "contention:", err)
		stop()
		os.Exit(1)
	}
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
}

// run is the program: args are its command-line arguments, kubeconfigEnv
// the KUBECONFIG variable, the table goes to stdout and progress to p.
func run(ctx context.Context, args []string, kubeconfigEnv string, stdout io.Writer, p *progress) error {
	flags := flag.NewFlagSet("contention", flag.ContinueOnError)
	kubeconfig := flags.String("kubeconfig", kubeconfigEnv,
		"kubeconfig of the cluster to use (default $KUBECONFIG); empty starts a kube-apiserver in process")
	writersFlag := flags.String("writers", "4,16,64", "comma-separated numbers of concurrent writers")
	updates := flags.Int("updates", 10, "increments per writer")
	if err := flags.Parse(args); err != nil {
		return err
	}
	writerCounts, err := parseCounts(*writersFlag)
	if err != nil {
		return fmt.Errorf("--writers: %w", err)
	}
	if *updates < 1 {
		return errors.New("--updates must be at least 1")
	}

	var cfg *rest.Config
	where := ""
	if *kubeconfig != "" {
		if cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig); err != nil {
			return err
		}
		where = "the cluster at " + cfg.Host
	} else {
		p.line("starting etcd and kube-apiserver in process")
		var shutdown func()
		if cfg, shutdown, err = startInProcess(p); err != nil {
			return err
		}
		defer shutdown()
		where = "an in-process kube-apiserver on embedded etcd"
		if v := moduleVersion("k8s.io/kubernetes"); v != "" {
			// A module build carries no kube-apiserver version of its
			// own (it reports v0.0.0-master), only the module's.
			where = fmt.Sprintf("an in-process kube-apiserver (k8s.io/kubernetes %s) on embedded etcd", v)
		}
	}
	// Client-side rate limiting would queue the writers and hide the
	// conflicts this measures.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 10000, 10000
	// Requests are counted as they leave for the server, client-go's own
	// retries included.
	var requests reqcount.Counter
	client, err := kubernetes.NewForConfig(requests.Config(cfg))
	if err != nil {
		return err
	}

	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kuberetry-contention-"},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	defer func() {
		// A fresh context: ctx may be the interrupted one.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			p.line("contention: delete namespace %s: %v", ns.Name, err)
			return
		}
		p.line("deleted namespace %s", ns.Name)
	}()
	p.line("namespace %s on %s", ns.Name, cfg.Host)
	if *kubeconfig != "" {
		if v, err := client.Discovery().ServerVersion(); err == nil {
			where += ", version " + v.GitVersion
		}
	}

	var sums []contention.Summary
	var problems []string
	total := len(writerCounts) * len(strategies)
	for _, writers := range writerCounts {
		for _, s := range strategies {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := writers * *updates
			label := fmt.Sprintf("[%d/%d] %s, %d writers", len(sums)+1, total, s.Name, writers)
			res, err := contention.Run(ctx, s, contention.Config{
				Client:    client,
				Namespace: ns.Name,
				Name:      fmt.Sprintf("counter-%d", len(sums)),
				Writers:   writers,
				Updates:   *updates,
				Progress:  func(done int) { p.live("%s: %d/%d updates", label, done, n) },
				Requests:  &requests,
			})
			if err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			sum := contention.Summarize(res)
			p.line("%s: %d/%d succeeded in %v", label, sum.Succeeded, n, sum.Wall.Round(time.Millisecond))
			sums = append(sums, sum)
			if sum.Final != sum.Succeeded {
				problems = append(problems, fmt.Sprintf("%s: counter %d but %d increments succeeded", label, sum.Final, sum.Succeeded))
			}
			if err := contention.FirstNonConflict(res); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %d gave up on something other than a Conflict, e.g. %v", label, sum.GaveUpNonConflict, err))
			}
			if sum.MaxAttempts > s.Steps {
				problems = append(problems, fmt.Sprintf("%s: a call made %d attempts, more than Steps %d", label, sum.MaxAttempts, s.Steps))
			}
			if sum.CurrentModified > 0 {
				problems = append(problems, fmt.Sprintf("%s: %d calls modified the object they started from", label, sum.CurrentModified))
			}
		}
	}

	fmt.Fprintf(stdout, "%d increments per writer of one ConfigMap counter, on %s:\n\n", *updates, where)
	printTable(stdout, sums)
	if len(problems) > 0 {
		return fmt.Errorf("unexpected results:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// startInProcess starts etcd and a kube-apiserver and returns the server's
// client config and a function that stops both and removes their files.
func startInProcess(p *progress) (cfg *rest.Config, shutdown func(), err error) {
	testserver.QuietGlobalLogs()
	etcd, err := testserver.StartEtcd()
	if err != nil {
		return nil, nil, err
	}
	tb := testserver.NewProcessTB(io.Discard)
	shutdown = func() {
		p.line("stopping kube-apiserver and etcd")
		tb.Close()
		etcd.Stop()
	}
	defer func() {
		// The test server reports some failures through tb.Fatalf,
		// which panics outside a test.
		if r := recover(); r != nil {
			err = fmt.Errorf("start kube-apiserver: %v", r)
		}
		if err != nil {
			shutdown()
		}
	}()
	s, err := testserver.Start(tb, etcd)
	if err != nil {
		return nil, nil, err
	}
	return s.Config, shutdown, nil
}

// moduleVersion returns the version of module path built into this
// program, or "".
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range info.Deps {
		if m.Path == path {
			return m.Version
		}
	}
	return ""
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

// progress reports on standard error what the program is doing.
type progress struct {
	w io.Writer
	// terminal says whether a line may be rewritten in place.
	terminal bool
	mu       sync.Mutex
	// overwrite is set while the last line is one live may replace.
	overwrite bool
}

func newProgress(f *os.File) *progress {
	fi, err := f.Stat()
	return &progress{w: f, terminal: err == nil && fi.Mode()&os.ModeCharDevice != 0}
}

// line prints a line.
func (p *progress) line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.overwrite {
		fmt.Fprint(p.w, "\r\033[K")
		p.overwrite = false
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

// live prints a line that the next one replaces, on a terminal only;
// elsewhere it prints nothing, to keep logs short.
func (p *progress) live(format string, args ...any) {
	if !p.terminal {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
	p.overwrite = true
}
