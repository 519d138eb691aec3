package contention

import (
	"context"
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

	"github.com/kuberetry/retry/integration/internal/reqcount"
	"github.com/kuberetry/retry/integration/internal/testserver"
)

// Cluster is where a command runs the workload: a namespace of its own on
// a kube-apiserver, started in process or given by a kubeconfig, and a
// client whose requests are counted on the wire.
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
}

// Open connects to the cluster of kubeconfig, or, when kubeconfig is
// empty, starts etcd and a kube-apiserver in process on loopback, and
// creates a namespace named from prefix there. The caller must Close the
// Cluster.
func Open(ctx context.Context, kubeconfig, prefix string, p *Progress) (_ *Cluster, err error) {
	c := &Cluster{p: p, Requests: &reqcount.Counter{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	var cfg *rest.Config
	if kubeconfig != "" {
		if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			return nil, err
		}
		c.Where = "the cluster at " + cfg.Host
	} else {
		p.Line("starting etcd and kube-apiserver in process")
		if cfg, c.shutdown, err = startInProcess(p); err != nil {
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
	// Client-side rate limiting would queue the writers and hide the
	// conflicts this measures.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 10000, 10000
	// Requests are counted as they leave for the server, client-go's own
	// retries included.
	if c.Client, err = kubernetes.NewForConfig(c.Requests.Config(cfg)); err != nil {
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

// startInProcess starts etcd and a kube-apiserver and returns the server's
// client config and a function that stops both and removes their files.
func startInProcess(p *Progress) (cfg *rest.Config, shutdown func(), err error) {
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
