package testserver

import (
	"fmt"
	"path"
	"sync"
	"sync/atomic"

	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// Server is a running kube-apiserver.
type Server struct {
	// Config is the server's loopback client config. It authenticates as a
	// member of system:masters, which no max-in-flight limit throttles;
	// use Impersonate for a client that the server treats as an ordinary user.
	// QPS and Burst are high, so client-side rate limiting does not hide
	// what the server does.
	Config *rest.Config
	// Client is a typed clientset built from Config.
	Client kubernetes.Interface

	stopOnce sync.Once
	tearDown func()
}

// prefixes makes every apiserver's etcd prefix unique within the process.
var prefixes atomic.Int64

// Start starts a kube-apiserver that stores its objects in etcd under a
// prefix of its own, so servers sharing one etcd never see each other's
// objects. flags are extra kube-apiserver command-line flags, e.g.
// "--max-requests-inflight=1". tb receives the server's log; the server
// stops when tb's cleanups run or when Stop is called, whichever is first.
func Start(tb ktesting.TB, etcd *Etcd, flags ...string) (*Server, error) {
	prefix := path.Join("/kuberetry", fmt.Sprintf("server-%d", prefixes.Add(1)), "registry")
	storage := storagebackend.NewDefaultConfig(prefix, nil)
	storage.Transport.ServerList = []string{etcd.URL}

	// The kube-apiserver defaults that integration tests of Kubernetes
	// itself use: no endpoint reconciler (127.0.0.1 is not a valid
	// endpoint) and no ServiceAccount admission (no controller-manager
	// runs to create service accounts).
	all := append([]string{
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
	}, flags...)

	opts := kubeapiservertesting.NewDefaultTestServerOptions()
	// The invariant checks scrape the apiserver's own metrics at tear-down
	// and fail the test on Kubernetes-internal surprises; they say nothing
	// about this library, and a server driven into 429s on purpose is the
	// kind of server they may complain about.
	opts.DisableInvariantChecks = true

	ts, err := kubeapiservertesting.StartTestServer(tb, opts, all, storage)
	if err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	client, err := kubernetes.NewForConfig(ts.ClientConfig)
	if err != nil {
		ts.TearDownFn()
		return nil, err
	}
	s := &Server{Config: ts.ClientConfig, Client: client, tearDown: ts.TearDownFn}
	tb.Cleanup(s.Stop)
	return s, nil
}

// Stop stops the server; calling it again does nothing.
func (s *Server) Stop() {
	s.stopOnce.Do(s.tearDown)
}

// Impersonate returns a copy of the server's config that acts as the
// ordinary user name in group system:authenticated. Requests from it are
// authorized by RBAC and, unlike system:masters, are subject to the
// server's max-in-flight limits.
func (s *Server) Impersonate(name string) *rest.Config {
	cfg := rest.CopyConfig(s.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: name,
		Groups:   []string{"system:authenticated"},
	}
	return cfg
}
