// Package testserver runs a real kube-apiserver in process, backed by a real
// embedded etcd, on loopback only. It is shared by the integration tests and
// by the contention demo, so both exercise exactly the same server.
//
// One etcd serves many apiservers: each apiserver gets its own storage
// prefix, so tests stay isolated while paying etcd's start-up cost once.
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

// Etcd is an embedded etcd server listening on 127.0.0.1.
type Etcd struct {
	etcd *embed.Etcd
	dir  string
	// URL is the client URL to give an apiserver (--etcd-servers).
	URL string
}

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
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(ports[0]))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", fmt.Sprint(ports[1]))}

	cfg := embed.NewConfig()
	cfg.Name = "kuberetry"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// The data is thrown away after the run: skipping fsync makes every
	// write much cheaper on a slow CI disk without changing what the
	// apiserver sees (same revisions, same conflicts).
	cfg.UnsafeNoFsync = true
	// etcd logs an error for every listener it closes on a normal Stop;
	// a failure to start is returned by StartEtcd, and one while running
	// shows up as failing apiserver requests.
	cfg.LogLevel = "fatal"
	cfg.LogOutputs = []string{"stderr"}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("etcd failed while starting: %w", err)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		e.Close()
		os.RemoveAll(dir)
		return nil, errors.New("etcd not ready after 60s")
	}
	return &Etcd{etcd: e, dir: dir, URL: clientURL.String()}, nil
}

// Stop shuts etcd down and removes its data directory.
func (e *Etcd) Stop() {
	if e == nil {
		return
	}
	e.etcd.Close()
	os.RemoveAll(e.dir)
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
