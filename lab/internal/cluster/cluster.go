// Package cluster is where the lab's commands run their workloads: a
// namespace on an in-process kube-apiserver, an HA control plane in
// process or the cluster of a kubeconfig (Cluster, ClusterFlags), the
// progress they report on standard error (Progress), and their main
// (Main).
package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kuberetry/retry/integration/testenv/ha"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// Cluster is where a command runs the workload: a namespace of its own on
// a kube-apiserver, started in process or given by a kubeconfig, or on an
// HA control plane started in process, and a client whose requests are
// counted on the wire.
type Cluster struct {
	Client kubernetes.Interface
	// Requests counts every request Client sends, client-go's own
	// retries included.
	Requests *reqcount.Counter
	// Namespace was created by Open; Close deletes it.
	Namespace string
	// Host is the server's URL.
	Host string
	// Config is the server's client config, uncounted, for clients of
	// the caller's own (through a proxy, with a wrapper of their own).
	Config *rest.Config
	// Where describes the server, for a report's title.
	Where string

	p        *Progress
	shutdown func() // stops an in-process server; nil otherwise

	// ha is the HA control plane, nil for one apiserver.
	ha *ha.ControlPlane
	// writers are the HA control plane's clientsets, one per writer,
	// made as writers ask for them.
	mu      sync.Mutex
	writers []kubernetes.Interface
}

// MaxAPIServers is the most apiservers Open starts for an HA control
// plane.
const MaxAPIServers = ha.MaxAPIServers

// Open connects to the cluster of kubeconfig, or, when kubeconfig is
// empty, starts etcd and a kube-apiserver in process on loopback, and
// creates a namespace named from prefix there. With apiservers from 1 to
// MaxAPIServers it starts an HA control plane in process instead (that
// many kube-apiservers on a three-member etcd, behind a round-robin load
// balancer; kubeconfig must be empty), whose writers reach it through
// clients of their own (Writer). The caller must Close the Cluster.
func Open(ctx context.Context, kubeconfig string, apiservers int, prefix string, p *Progress) (*Cluster, error) {
	return open(ctx, kubeconfig, apiservers, prefix, p, nil)
}

// OpenInProcess starts etcd and a kube-apiserver in process on loopback,
// as Open does without a kubeconfig, with the extra kube-apiserver
// command-line flags given ("--authorization-mode=RBAC"), and creates a
// namespace named from prefix there. The caller must Close the Cluster.
func OpenInProcess(ctx context.Context, prefix string, p *Progress, flags ...string) (*Cluster, error) {
	return open(ctx, "", 0, prefix, p, flags)
}

// open is Open, with flags for an in-process kube-apiserver.
func open(ctx context.Context, kubeconfig string, apiservers int, prefix string, p *Progress, flags []string) (_ *Cluster, err error) {
	if err := CheckAPIServers(apiservers, kubeconfig); err != nil {
		return nil, err
	}
	c := &Cluster{p: p, Requests: &reqcount.Counter{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	var cfg *rest.Config
	switch {
	case apiservers > 0:
		p.Line("starting an HA control plane in process: 3 etcd members, %d kube-apiservers, a load balancer", apiservers)
		if c.ha, c.shutdown, err = startHA(apiservers, p); err != nil {
			return nil, err
		}
		cfg = c.ha.Config()
		version := ""
		if v := moduleVersion("k8s.io/kubernetes"); v != "" {
			version = fmt.Sprintf(" (k8s.io/kubernetes %s)", v)
		}
		c.Where = fmt.Sprintf("an HA control plane in process%s: %d kube-apiserver(s) on a 3-member embedded etcd "+
			"behind a round-robin load balancer, each writer a connection of its own", version, apiservers)
	case kubeconfig != "":
		if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			return nil, err
		}
		c.Where = "the cluster at " + cfg.Host
	default:
		p.Line("starting etcd and kube-apiserver in process")
		if cfg, c.shutdown, err = startInProcess(p, flags); err != nil {
			return nil, err
		}
		c.Where = "an in-process kube-apiserver on embedded etcd"
		if v := moduleVersion("k8s.io/kubernetes"); v != "" {
			// A module build carries no kube-apiserver version of its
			// own (it reports v0.0.0-master), only the module's.
			c.Where = fmt.Sprintf("an in-process kube-apiserver (k8s.io/kubernetes %s) on embedded etcd", v)
		}
	}
	c.Host, c.Config = cfg.Host, cfg
	if c.Client, err = c.client(cfg); err != nil {
		return nil, err
	}

	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	c.Namespace = ns.Name
	p.Line("namespace %s on %s", ns.Name, cfg.Host)
	if kubeconfig != "" {
		if v, err := c.Client.Discovery().ServerVersion(); err == nil {
			c.Where += ", version " + v.GitVersion
		}
	}
	return c, nil
}

// client returns a clientset of cfg whose requests c.Requests counts as
// they leave for the server, client-go's own retries included. Client-side
// rate limiting would queue the writers and hide the conflicts this
// measures: it has none to speak of.
func (c *Cluster) client(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 10000, 10000
	return kubernetes.NewForConfig(c.Requests.Config(cfg))
}

// Writer returns the clientset writer w uses: Client, except on an HA
// control plane, where each writer has a clientset of its own, and so a
// connection of its own, which the balancer sends to the next apiserver:
// the writers spread over the apiservers, as many controllers do. Its
// requests are counted in Requests too.
func (c *Cluster) Writer(w int) (kubernetes.Interface, error) {
	if c.ha == nil {
		return c.Client, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.writers) <= w {
		cs, err := c.client(c.ha.Config())
		if err != nil {
			return nil, err
		}
		c.writers = append(c.writers, cs)
	}
	return c.writers[w], nil
}

// ClusterFlags are the command-line flags that choose where a command
// runs: --kubeconfig (default $KUBECONFIG) and --apiservers.
type ClusterFlags struct {
	fs         *flag.FlagSet
	kubeconfig *string
	apiservers *int
}

// AddClusterFlags defines --kubeconfig, whose default is kubeconfigEnv
// (the KUBECONFIG variable), and --apiservers on fs.
func AddClusterFlags(fs *flag.FlagSet, kubeconfigEnv string) *ClusterFlags {
	return &ClusterFlags{
		fs: fs,
		kubeconfig: fs.String("kubeconfig", kubeconfigEnv,
			"kubeconfig of the cluster to use (default $KUBECONFIG); empty starts a kube-apiserver in process"),
		apiservers: fs.Int("apiservers", 0, fmt.Sprintf(
			"run on an HA control plane in process: this many kube-apiservers (1 to %d) on a 3-member etcd, behind a round-robin load balancer, "+
				"each writer a connection of its own (default: one kube-apiserver on one etcd, one connection)", MaxAPIServers)),
	}
}

// APIServers returns the --apiservers given, 0 if none was. Call it after
// the flags are parsed.
func (f *ClusterFlags) APIServers() int { return *f.apiservers }

// Check returns a usage error unless the flags, parsed, go together: an
// --apiservers given is from 1 to MaxAPIServers, and comes without
// --kubeconfig (KUBECONFIG does not count: --apiservers overrides it).
func (f *ClusterFlags) Check() error {
	var apiservers, kubeconfig bool
	f.fs.Visit(func(fl *flag.Flag) {
		apiservers = apiservers || fl.Name == "apiservers"
		kubeconfig = kubeconfig || fl.Name == "kubeconfig"
	})
	switch {
	case !apiservers:
		return nil
	case *f.apiservers == 0: // given, 0 is as out of range as any
		return errAPIServersRange(0)
	case kubeconfig:
		return CheckAPIServers(*f.apiservers, *f.kubeconfig)
	}
	return CheckAPIServers(*f.apiservers, "")
}

// Open checks the flags and opens the Cluster they choose, with a
// namespace named from prefix.
func (f *ClusterFlags) Open(ctx context.Context, prefix string, p *Progress) (*Cluster, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	kubeconfig := *f.kubeconfig
	if *f.apiservers > 0 {
		kubeconfig = "" // KUBECONFIG does not choose an HA control plane's cluster
	}
	return Open(ctx, kubeconfig, *f.apiservers, prefix, p)
}

// Connections returns the connections the load balancer of an HA control
// plane has sent to each kube-apiserver, in rotation order; nil for one
// apiserver.
func (c *Cluster) Connections() []int64 {
	if c.ha == nil {
		return nil
	}
	routed := c.ha.Balancer.Stats().Routed
	var n []int64
	for _, host := range c.ha.Balancer.Backends() {
		n = append(n, routed[host])
	}
	return n
}

// CheckAPIServers returns an error unless apiservers, the number of
// kube-apiservers of an HA control plane (0 for none), is from 1 to
// MaxAPIServers and kubeconfig is empty.
func CheckAPIServers(apiservers int, kubeconfig string) error {
	switch {
	case apiservers == 0:
		return nil
	case apiservers < 0 || apiservers > MaxAPIServers:
		return errAPIServersRange(apiservers)
	case kubeconfig != "":
		return errors.New("--apiservers starts an HA control plane in process: it cannot be used with --kubeconfig")
	}
	return nil
}

func errAPIServersRange(n int) error {
	return fmt.Errorf("--apiservers %d: want 1 to %d kube-apiservers", n, MaxAPIServers)
}

// Close deletes the namespace and stops an in-process server.
func (c *Cluster) Close() {
	if c.Namespace != "" {
		// A fresh context: the caller's may be the interrupted one.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := c.Client.CoreV1().Namespaces().Delete(ctx, c.Namespace, metav1.DeleteOptions{}); err != nil {
			c.p.Line("delete namespace %s: %v", c.Namespace, err)
		} else {
			c.p.Line("deleted namespace %s", c.Namespace)
		}
		cancel()
		c.Namespace = ""
	}
	if c.shutdown != nil {
		c.shutdown()
		c.shutdown = nil
	}
}

// startInProcess starts etcd and a kube-apiserver with the extra flags and
// returns the server's client config and a function that stops both and
// removes their files.
func startInProcess(p *Progress, flags []string) (cfg *rest.Config, shutdown func(), err error) {
	testserver.QuietGlobalLogs()
	etcd, err := testserver.StartEtcd()
	if err != nil {
		return nil, nil, err
	}
	tb := testserver.NewProcessTB(io.Discard)
	shutdown = func() {
		p.Line("stopping kube-apiserver and etcd")
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
	s, err := testserver.Start(tb, etcd, flags...)
	if err != nil {
		return nil, nil, err
	}
	return s.Config, shutdown, nil
}

// startHA starts an HA control plane of apiservers kube-apiservers and
// returns it and a function that stops it and removes its files.
func startHA(apiservers int, p *Progress) (cp *ha.ControlPlane, shutdown func(), err error) {
	testserver.QuietGlobalLogs()
	tb := testserver.NewProcessTB(io.Discard)
	shutdown = func() {
		p.Line("stopping the HA control plane")
		tb.Close()
	}
	defer func() {
		// The test server reports some failures through tb.Fatalf,
		// which panics outside a test.
		if r := recover(); r != nil {
			err = fmt.Errorf("start the HA control plane: %v", r)
		}
		if err != nil {
			shutdown()
		}
	}()
	cp, err = ha.Start(tb, ha.Options{APIServers: apiservers})
	return cp, shutdown, err
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

// Progress reports what a command is doing, on standard error.
type Progress struct {
	w io.Writer
	// terminal says whether a line may be rewritten in place.
	terminal bool
	mu       sync.Mutex
	// overwrite is set while the last line is one Live may replace.
	overwrite bool
}

// NewProgress returns a Progress that writes to w, rewriting live lines in
// place when w is a terminal.
func NewProgress(w io.Writer) *Progress {
	p := &Progress{w: w}
	if f, ok := w.(*os.File); ok {
		fi, err := f.Stat()
		p.terminal = err == nil && fi.Mode()&os.ModeCharDevice != 0
	}
	return p
}

// Line prints a line.
func (p *Progress) Line(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.overwrite {
		fmt.Fprint(p.w, "\r\033[K")
		p.overwrite = false
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

// Live prints a line that the next one replaces, on a terminal only;
// elsewhere it prints nothing, to keep logs short.
func (p *Progress) Live(format string, args ...any) {
	if !p.terminal {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
	p.overwrite = true
}
