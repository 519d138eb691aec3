// Package testserver runs a real kube-apiserver in process, backed by a real
// embedded etcd, on loopback only. It is shared by the integration tests and
// by the contention demo, so both exercise exactly the same server.
//
// One etcd serves many apiservers: each apiserver gets its own storage
// prefix, so tests stay isolated while paying etcd's start-up cost once.
// An etcd of three members (StartEtcdCluster) is what an HA control plane
// stores its objects in; a test can crash its leader and start it again.
package testserver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Storage is an etcd that a kube-apiserver stores its objects in: one
// server (*Etcd) or a cluster (*EtcdCluster).
type Storage interface {
	// ClientURLs are the URLs to give an apiserver (--etcd-servers).
	ClientURLs() []string
}

// Etcd is an embedded etcd server listening on 127.0.0.1.
type Etcd struct {
	etcd *embed.Etcd
	dir  string
	// URL is the client URL to give an apiserver (--etcd-servers).
	URL string
}

// etcdReadyTimeout bounds the wait for an etcd server to be ready: a member
// of a cluster is ready once a quorum has elected a leader.
const etcdReadyTimeout = 60 * time.Second

// StartEtcd starts an embedded etcd with its data in a fresh temporary
// directory, which Stop removes. It listens on loopback only, on ports the
// kernel reports free; since a port can be taken between that check and
// etcd's own listen, a failed start is retried a few times.
func StartEtcd() (*Etcd, error) {
	var errs []error
	for range 5 {
		e, err := startEtcdOnce()
		if err == nil {
			return e, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("start embedded etcd: %w", errors.Join(errs...))
}

func startEtcdOnce() (*Etcd, error) {
	dir, err := os.MkdirTemp("", "kuberetry-etcd-")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	m := newMember("kuberetry", dir, ports[0], ports[1])
	cfg := m.config(m.name + "=" + m.peerURL.String())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := waitReady(e, etcdReadyTimeout); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Etcd{etcd: e, dir: dir, URL: m.clientURL.String()}, nil
}

// ClientURLs returns the server's one client URL.
func (e *Etcd) ClientURLs() []string { return []string{e.URL} }

// Stop shuts etcd down and removes its data directory.
func (e *Etcd) Stop() {
	if e == nil {
		return
	}
	e.etcd.Close()
	os.RemoveAll(e.dir)
}

// member is what an etcd server needs to start, and to start again on the
// same data: its name, data directory and loopback URLs.
type member struct {
	name, dir          string
	clientURL, peerURL url.URL
}

func newMember(name, dir string, clientPort, peerPort int) member {
	return member{
		name:      name,
		dir:       dir,
		clientURL: url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(clientPort))},
		peerURL:   url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(peerPort))},
	}
}

// config returns the member's embed configuration in the cluster
// initialCluster (name=peerURL,...). A restart uses the same: a member
// with data in its directory ignores the initial cluster.
func (m member) config(initialCluster string) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenClientUrls = []url.URL{m.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{m.clientURL}
	cfg.ListenPeerUrls = []url.URL{m.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.peerURL}
	cfg.InitialCluster = initialCluster
	// The data is thrown away after the run: skipping fsync makes every
	// write much cheaper on a slow CI disk without changing what the
	// apiserver sees (same revisions, same conflicts).
	cfg.UnsafeNoFsync = true
	// etcd logs an error for every listener it closes on a normal Stop;
	// a failure to start is returned by StartEtcd, and one while running
	// shows up as failing apiserver requests.
	cfg.LogLevel = "fatal"
	cfg.LogOutputs = []string{"stderr"}
	return cfg
}

// waitReady waits until e serves clients, it fails, or timeout has
// passed; on an error e is closed.
func waitReady(e *embed.Etcd, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd failed while starting: %w", err)
	case <-t.C:
		e.Server.Stop()
		e.Close()
		return fmt.Errorf("etcd not ready after %v", timeout)
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// All listeners are held open together so the ports differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
