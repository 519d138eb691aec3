// Package ha runs an HA control plane in process, on loopback: several
// kube-apiservers that share one etcd key prefix, on an etcd cluster of
// three members, behind a round-robin TCP load balancer. What production
// control planes are, and where a controller meets an apiserver going away
// under it and an etcd leader change. A test takes an apiserver out
// (its connections reset, the balancer no longer uses it) and puts a new
// one in on the same data, and crashes and restarts an etcd member.
//
// The single-server setup (testserver.Start on one etcd) stays what the
// fast tests use; this one costs a start of each apiserver.
package ha

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/kuberetry/retry/integration/testenv/faultproxy"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// MaxAPIServers is the most apiservers Start runs: each costs a few
// hundred MB and a start of several seconds on a 2-core machine.
const MaxAPIServers = 5

// etcdMembers is the size of the etcd cluster: the smallest that survives
// the loss of a member, its leader included.
const etcdMembers = 3

// Options configure Start.
type Options struct {
	// APIServers is the number of kube-apiservers, 1 to MaxAPIServers.
	APIServers int
	// Flags are extra kube-apiserver command-line flags, given to every
	// apiserver, replacements included.
	Flags []string
}

// ControlPlane is a running HA control plane. Its methods are safe for
// concurrent use, though a test changes it from one goroutine.
type ControlPlane struct {
	// Etcd is the etcd cluster that every apiserver stores its objects
	// in, under one Prefix.
	Etcd *testserver.EtcdCluster
	// Balancer is the load balancer in front of the apiservers: each new
	// connection goes to the next apiserver in rotation.
	Balancer *faultproxy.Proxy
	// Prefix is the etcd key prefix that every apiserver uses.
	Prefix string
	// ServingCert is the certificate every apiserver presents (they
	// share one), so a client verifies whichever one the balancer picks.
	ServingCert []byte

	tb      ktesting.TB
	token   string // every apiserver admits it as an administrator
	certDir string
	flags   []string

	mu      sync.Mutex
	servers []*testserver.Server // nil while stopped
}

// Start starts the etcd cluster, opts.APIServers kube-apiservers on it
// and the balancer in front of them, and returns once every apiserver
// serves. tb receives the apiservers' logs; everything stops when its
// cleanups run, the balancer first, etcd last. If something does not
// start, Start returns an error that names it, within bounded time: a
// minute for etcd, about 90s for each apiserver (the test server's waits
// for /healthz and the default namespace).
func Start(tb ktesting.TB, opts Options) (*ControlPlane, error) {
	if opts.APIServers < 1 || opts.APIServers > MaxAPIServers {
		return nil, fmt.Errorf("ha: APIServers is %d, want 1 to %d", opts.APIServers, MaxAPIServers)
	}
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	etcd, err := testserver.StartEtcdCluster(etcdMembers)
	if err != nil {
		return nil, fmt.Errorf("ha: the etcd cluster did not start: %w", err)
	}
	tb.Cleanup(etcd.Stop) // registered first, so it runs after the apiservers stopped
	cp := &ControlPlane{
		Etcd:    etcd,
		tb:      tb,
		token:   hex.EncodeToString(token),
		certDir: tb.TempDir(),
		flags:   opts.Flags,
		servers: make([]*testserver.Server, opts.APIServers),
	}
	hosts := make([]string, opts.APIServers)
	for i := range opts.APIServers {
		// One after the other: the first writes the serving certificate
		// that the others present, and picks the prefix they share.
		s, err := cp.start()
		if err != nil {
			return nil, fmt.Errorf("ha: kube-apiserver %d of %d did not start: %w", i+1, opts.APIServers, err)
		}
		if i == 0 {
			cp.Prefix, cp.ServingCert = s.Prefix, s.ServingCert
		}
		cp.servers[i] = s
		if hosts[i], err = hostOf(s); err != nil {
			return nil, err
		}
	}
	if cp.Balancer, err = faultproxy.New(hosts...); err != nil {
		return nil, fmt.Errorf("ha: the load balancer did not start: %w", err)
	}
	tb.Cleanup(func() { cp.Balancer.Close() })
	return cp, nil
}

// start starts an apiserver on the control plane's prefix (a new one for
// the first), certificate and token.
func (cp *ControlPlane) start() (*testserver.Server, error) {
	return testserver.StartWithOptions(cp.tb, cp.Etcd, testserver.Options{
		Flags:   cp.flags,
		Prefix:  cp.Prefix,
		CertDir: cp.certDir,
		Token:   cp.token,
	})
}

// hostOf returns the host:port s serves on.
func hostOf(s *testserver.Server) (string, error) {
	u, err := url.Parse(s.Config.Host)
	if err != nil {
		return "", fmt.Errorf("ha: apiserver URL %q: %w", s.Config.Host, err)
	}
	return u.Host, nil
}

// Config returns a client config that reaches the apiservers through the
// balancer, as an administrator, verifying the shared serving certificate.
// Every call returns a config with a dialer of its own, so client-go's
// transport cache gives each clientset made from one its own connections
// (over HTTP/2, one): clientsets from two calls may reach two apiservers,
// as two controller processes do, while the requests of one clientset go
// to the apiserver its connection reached. QPS and Burst are high, so
// client-side rate limiting does not hide what the servers do.
func (cp *ControlPlane) Config() *rest.Config {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &rest.Config{
		Host:            "https://" + cp.Balancer.Addr(),
		BearerToken:     cp.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.ServingCert},
		QPS:             1000,
		Burst:           10000,
		Dial:            d.DialContext,
	}
}

// APIServers is the number of apiserver slots, stopped ones included.
func (cp *ControlPlane) APIServers() int { return len(cp.servers) }

// Server returns the apiserver in slot i, nil while it is stopped. Its
// Config reaches it directly, not through the balancer.
func (cp *ControlPlane) Server(i int) *testserver.Server {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.servers[i]
}

// StopServer takes the apiserver in slot i out of the balancer's rotation,
// which resets its open connections, and then stops it. It returns the
// number of connections reset.
func (cp *ControlPlane) StopServer(i int) (reset int, err error) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if i < 0 || i >= len(cp.servers) || cp.servers[i] == nil {
		return 0, fmt.Errorf("ha: no apiserver running in slot %d of %d", i, len(cp.servers))
	}
	s := cp.servers[i]
	host, err := hostOf(s)
	if err != nil {
		return 0, err
	}
	reset = cp.Balancer.RemoveBackend(host)
	s.Stop()
	cp.servers[i] = nil
	return reset, nil
}

// ReplaceServer starts a new apiserver in slot i, stopped by StopServer,
// on the shared prefix (it finds every object the others stored), and puts
// it into the balancer's rotation once it serves.
func (cp *ControlPlane) ReplaceServer(i int) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if i < 0 || i >= len(cp.servers) || cp.servers[i] != nil {
		return fmt.Errorf("ha: slot %d of %d is not a stopped apiserver's", i, len(cp.servers))
	}
	s, err := cp.start()
	if err != nil {
		return fmt.Errorf("ha: the replacement kube-apiserver in slot %d did not start: %w", i, err)
	}
	host, err := hostOf(s)
	if err != nil {
		s.Stop()
		return err
	}
	cp.servers[i] = s
	cp.Balancer.AddBackend(host)
	return nil
}
