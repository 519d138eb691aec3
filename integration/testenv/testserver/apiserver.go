package testserver

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
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
	// Prefix is the etcd key prefix under which the server stores its
	// objects; a server started later with Options.Prefix set to it finds
	// them, as a restarted apiserver does.
	Prefix string
	// ServingCert is the PEM certificate chain that the server presents
	// to a client connecting to 127.0.0.1 without naming a server (Config
	// names one of its own): a client that trusts it verifies the server.
	ServingCert []byte

	stopOnce sync.Once
	tearDown func()
}

// prefixes makes every apiserver's etcd prefix unique within the process.
var prefixes atomic.Int64

// Options configure StartWithOptions; the zero Options start what Start
// does.
type Options struct {
	// Flags are extra kube-apiserver command-line flags.
	Flags []string
	// Prefix is the etcd key prefix under which the server stores its
	// objects. Empty means a new prefix of the server's own; the Prefix of
	// a stopped server gives its successor that server's objects.
	Prefix string
	// CertDir, if not empty, is the directory where the server keeps its
	// serving certificate and key (--cert-dir): the first server given it
	// writes them, later ones present the same certificate.
	CertDir string
	// Token, if not empty, is a bearer token that the server accepts for
	// an administrator (a member of system:masters), from a
	// --token-auth-file, so that a client outlives the server it was made
	// for: Config's credentials belong to one server.
	Token string
}

// Start starts a kube-apiserver that stores its objects in etcd under a
// prefix of its own, so servers sharing one etcd never see each other's
// objects. flags are extra kube-apiserver command-line flags, e.g.
// "--max-requests-inflight=1". tb receives the server's log; the server
// stops when tb's cleanups run or when Stop is called, whichever is first.
func Start(tb ktesting.TB, etcd Storage, flags ...string) (*Server, error) {
	return StartWithOptions(tb, etcd, Options{Flags: flags})
}

// StartWithOptions starts a kube-apiserver as Start does, configured by
// opts.
func StartWithOptions(tb ktesting.TB, etcd Storage, opts Options) (*Server, error) {
	prefix := opts.Prefix
	if prefix == "" {
		prefix = path.Join("/kuberetry", fmt.Sprintf("server-%d", prefixes.Add(1)), "registry")
	}
	storage := storagebackend.NewDefaultConfig(prefix, nil)
	storage.Transport.ServerList = etcd.ClientURLs()

	// The kube-apiserver defaults that integration tests of Kubernetes
	// itself use: no endpoint reconciler (127.0.0.1 is not a valid
	// endpoint) and no ServiceAccount admission (no controller-manager
	// runs to create service accounts).
	all := []string{
		"--endpoint-reconciler-type=none",
		"--disable-admission-plugins=ServiceAccount",
	}
	if opts.CertDir != "" {
		all = append(all, "--cert-dir="+opts.CertDir)
	}
	if opts.Token != "" {
		if strings.ContainsAny(opts.Token, ",\"\r\n") {
			return nil, errors.New("testserver: Token must not hold a comma, a quote or a line break")
		}
		file := filepath.Join(tb.TempDir(), "tokens.csv")
		line := opts.Token + ",kuberetry-admin,kuberetry-admin,\"system:masters\"\n"
		if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
			return nil, err
		}
		all = append(all, "--token-auth-file="+file)
	}
	all = append(all, opts.Flags...)

	instance := kubeapiservertesting.NewDefaultTestServerOptions()
	// The invariant checks scrape the apiserver's own metrics at tear-down
	// and fail the test on Kubernetes-internal surprises; they say nothing
	// about this library, and a server driven into 429s on purpose is the
	// kind of server they may complain about.
	instance.DisableInvariantChecks = true

	ts, err := kubeapiservertesting.StartTestServer(tb, instance, all, storage)
	if err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	// Read now: the file may be in the server's temporary directory,
	// which goes when the server stops.
	servingCert, err := os.ReadFile(ts.ServerOpts.SecureServing.ServerCert.CertKey.CertFile)
	if err != nil {
		ts.TearDownFn()
		return nil, fmt.Errorf("read the serving certificate: %w", err)
	}
	client, err := kubernetes.NewForConfig(ts.ClientConfig)
	if err != nil {
		ts.TearDownFn()
		return nil, err
	}
	s := &Server{Config: ts.ClientConfig, Client: client, Prefix: prefix, ServingCert: servingCert, tearDown: ts.TearDownFn}
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
