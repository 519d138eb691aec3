package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kuberetry/retry/integration/testenv/faultproxy"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/lab/internal/cluster"
)

// spec is one run: the manager's load, its budget and the outage.
type spec struct {
	busy   bool
	budget bool
	outage time.Duration
}

func (s spec) load() string {
	if s.busy {
		return "busy"
	}
	return "idle"
}

func (s spec) policy() string {
	if s.budget {
		return "NewBudget()"
	}
	return "no budget"
}

func (s spec) String() string {
	return fmt.Sprintf("%s, %s, %v outage", s.load(), s.policy(), s.outage)
}

// line is one line the manager wrote, and when it arrived.
type line struct {
	at   time.Time
	text string
}

// event is a write of an -out ConfigMap the manager made, seen by the
// command's own watch.
type event struct {
	at   time.Time
	name string
	typ  watch.EventType
}

// outcome is what one run recorded.
type outcome struct {
	spec
	start, end time.Time // the outage's
	stop       time.Time // the run's end
	lines      []line
	scrapes    []scrape
	// atStart and atEnd are the scrapes taken as the outage started and
	// ended; atEnd is nil when the manager was gone by then.
	atStart, atEnd *scrape
	writes         []event
	fresh          string    // the object created at the outage's end
	exited         time.Time // zero while the manager ran
	exitCode       int
	proxy          faultproxy.Stats // at the outage's end
	proxyAtStart   faultproxy.Stats
}

// runner runs the runs on one apiserver.
type runner struct {
	c       *cluster.Cluster
	sh      shape
	self    string // this program, run again as the manager
	dir     string // for the kubeconfigs
	p       *cluster.Progress
	counter int
}

// run runs s and returns what it recorded.
func (r *runner) run(ctx context.Context, s spec) (_ *outcome, err error) {
	r.counter++
	ns, err := r.c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("operator-%d-", r.counter)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := r.c.Client.CoreV1().Namespaces().Delete(dctx, ns.Name, metav1.DeleteOptions{}); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete namespace %s: %w", ns.Name, derr))
		}
	}()
	cms := r.c.Client.CoreV1().ConfigMaps(ns.Name)
	objects := 0
	if s.busy {
		objects = r.sh.objects
	}
	for i := range objects {
		if _, err := cms.Create(ctx, workObject(fmt.Sprintf("work-%02d", i)), metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create work object: %w", err)
		}
	}

	u, err := url.Parse(r.c.Host)
	if err != nil {
		return nil, err
	}
	px, err := faultproxy.New(u.Host)
	if err != nil {
		return nil, err
	}
	defer px.Close()
	kubeconfig := filepath.Join(r.dir, fmt.Sprintf("kubeconfig-%d", r.counter))
	if err := writeKubeconfig(kubeconfig, r.c.Config, "https://"+px.Addr()); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsURL := "http://" + port + "/metrics"

	o := &outcome{spec: s}
	runCtx, stopRun := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer bg.Wait()
	defer stopRun()

	// The command's own watch of the manager's writes.
	w, err := cms.Watch(runCtx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	var mu sync.Mutex
	bg.Go(func() {
		defer w.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				cm, isCM := ev.Object.(*corev1.ConfigMap)
				if !isCM || !strings.HasSuffix(cm.Name, "-out") {
					continue
				}
				mu.Lock()
				o.writes = append(o.writes, event{at: time.Now(), name: cm.Name, typ: ev.Type})
				mu.Unlock()
			}
		}
	})

	lease := "operator-lab"
	cmd := exec.Command(r.self, managerArgs(ns.Name, s.budget, port, lease, r.sh.leader, r.sh.period)...)
	cmd.Env = append(os.Environ(), managerEnv+"=1", "KUBECONFIG="+kubeconfig)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the manager: %w", err)
	}
	exited := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for sc.Scan() {
			mu.Lock()
			o.lines = append(o.lines, line{at: time.Now(), text: sc.Text()})
			mu.Unlock()
		}
	}()
	go func() {
		<-readDone
		err := cmd.Wait()
		mu.Lock()
		o.exited, o.exitCode = time.Now(), cmd.ProcessState.ExitCode()
		if err != nil && o.exitCode == 0 {
			o.exitCode = -1
		}
		mu.Unlock()
		close(exited)
	}()
	defer func() {
		select {
		case <-exited:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	// Wait for the manager to lead and, when busy, to have written its
	// objects.
	client := &http.Client{Timeout: 2 * time.Second}
	if err := poll.Until(ctx, 100*time.Millisecond, 90*time.Second, func() bool {
		sc, err := scrapeOnce(client, metricsURL)
		if err != nil || sc.get(`leader_election_master_status{name="`+lease+`"}`) != 1 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		return len(o.writes) >= objects
	}); err != nil {
		mu.Lock()
		tail := lastLines(o.lines, 10)
		mu.Unlock()
		return nil, fmt.Errorf("%v: the manager did not lead and write its objects within 90s: %w; its last lines:\n%s", s, err, tail)
	}
	r.p.Line("%v: the manager leads", s)

	// The scrapes, until the run ends.
	bg.Go(func() {
		tick := time.NewTicker(r.sh.scrape)
		defer tick.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
			if sc, err := scrapeOnce(client, metricsURL); err == nil {
				mu.Lock()
				o.scrapes = append(o.scrapes, sc)
				mu.Unlock()
			}
		}
	})

	poll.Sleep(ctx, r.sh.warmup)
	if sc, err := scrapeOnce(client, metricsURL); err == nil {
		o.atStart = &sc
	} else {
		return nil, fmt.Errorf("%v: scrape before the outage: %w", s, err)
	}
	o.proxyAtStart = px.Stats()
	o.start = time.Now()
	px.SetOutage(true)
	poll.Sleep(ctx, s.outage)
	if sc, err := scrapeOnce(client, metricsURL); err == nil {
		o.atEnd = &sc
	}
	o.proxy = px.Stats()
	o.end = time.Now()
	px.SetOutage(false)
	o.fresh = "fresh"
	if _, err := cms.Create(ctx, workObject(o.fresh), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create the object after the outage: %w", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(r.sh.after):
	case <-exited:
		poll.Sleep(ctx, time.Second) // the lines still on their way
	}
	if sc, err := scrapeOnce(client, metricsURL); err == nil {
		mu.Lock()
		o.scrapes = append(o.scrapes, sc)
		mu.Unlock()
	}
	stopRun()
	bg.Wait()
	o.stop = time.Now()
	mu.Lock()
	defer mu.Unlock()
	snapshot := *o
	snapshot.lines = append([]line(nil), o.lines...)
	return &snapshot, ctx.Err()
}

// workObject is a ConfigMap the manager reconciles.
func workObject(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{workLabel: "yes"}},
		Data:       map[string]string{dataKey: "0"},
	}
}

// writeKubeconfig writes cfg's credentials, for the server at host, to
// path.
func writeKubeconfig(path string, cfg *rest.Config, host string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["lab"] = &clientcmdapi.Cluster{
		Server:                   host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos["lab"] = &clientcmdapi.AuthInfo{
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
	}
	kc.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: "lab"}
	kc.CurrentContext = "lab"
	return clientcmd.WriteToFile(*kc, path)
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// lastLines returns the last n of lines as text.
func lastLines(lines []line, n int) string {
	var out string
	for _, l := range lines[max(0, len(lines)-n):] {
		out += "  " + l.text + "\n"
	}
	return out
}
