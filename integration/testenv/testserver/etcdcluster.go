package testserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/embed"
)

// The cluster's raft timers, raised from etcd's 100ms heartbeat and 1s
// election timeout: on a loaded 2-core machine, where the apiservers and
// the test's writers share the cores with etcd, a heartbeat late by a few
// hundred milliseconds would otherwise start elections nobody asked for. A
// follower that hears nothing from its leader for 2 to 4 s (the election
// timeout, randomized up to twice) starts an election.
const (
	clusterTickMs     = 200
	clusterElectionMs = 2000
)

// EtcdCluster is an etcd cluster whose members are embedded etcd servers
// in this process, each with its own data directory and its own client and
// peer ports on 127.0.0.1. An apiserver given its ClientURLs reaches it as
// a cluster: its etcd client spreads requests over the members and moves
// off one that is down. Its methods are safe for concurrent use.
type EtcdCluster struct {
	dir     string // holds every member's data directory
	initial string // the initial cluster, name=peerURL,...
	members []member

	mu      sync.Mutex
	running []*embed.Etcd   // nil while a member is stopped
	closing []chan struct{} // closed once a stopped member has closed
}

// StartEtcdCluster starts an etcd cluster of n members (an odd number: 1,
// 3 or 5) and returns once every member serves clients, which takes a
// quorum that has elected a leader. A start that fails, or whose members
// are not ready within a minute, is retried on other ports a few times;
// the error names the member that did not start.
func StartEtcdCluster(n int) (*EtcdCluster, error) {
	if n < 1 || n > 5 || n%2 == 0 {
		return nil, fmt.Errorf("testserver: an etcd cluster of %d members: want 1, 3 or 5", n)
	}
	var errs []error
	for range 5 {
		ports, err := freePorts(2 * n)
		if err != nil {
			return nil, fmt.Errorf("start an etcd cluster of %d: %w", n, err)
		}
		c, err := startClusterOnce(ports, etcdReadyTimeout)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("start an etcd cluster of %d: %w", n, errors.Join(errs...))
}

// startClusterOnce starts a member for each pair of ports (client, peer)
// and waits up to timeout in all for every one to be ready.
func startClusterOnce(ports []int, timeout time.Duration) (_ *EtcdCluster, err error) {
	dir, err := os.MkdirTemp("", "kuberetry-etcd-cluster-")
	if err != nil {
		return nil, err
	}
	n := len(ports) / 2
	c := &EtcdCluster{dir: dir, running: make([]*embed.Etcd, n), closing: make([]chan struct{}, n)}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	var initial []string
	for i := range n {
		m := newMember(fmt.Sprintf("kuberetry-%d", i), filepath.Join(dir, fmt.Sprintf("member-%d", i)), ports[2*i], ports[2*i+1])
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	c.initial = strings.Join(initial, ",")

	// Every member must be up before any can be ready: readiness takes a
	// quorum.
	for i := range c.members {
		e, err := embed.StartEtcd(c.config(i))
		if err != nil {
			return nil, fmt.Errorf("etcd member %s: %w", c.describe(i), err)
		}
		c.running[i] = e
	}
	deadline := time.Now().Add(timeout)
	for i, e := range c.running {
		if err := waitReady(e, time.Until(deadline)); err != nil {
			c.running[i] = nil // closed by waitReady
			return nil, fmt.Errorf("etcd member %s: %w", c.describe(i), err)
		}
	}
	return c, nil
}

// config is member i's embed configuration, with the cluster's raft timers.
func (c *EtcdCluster) config(i int) *embed.Config {
	cfg := c.members[i].config(c.initial)
	cfg.TickMs, cfg.ElectionMs = clusterTickMs, clusterElectionMs
	return cfg
}

// describe names member i, as errors do: its name and index, and its
// client URL.
func (c *EtcdCluster) describe(i int) string {
	return fmt.Sprintf("%s (%d of %d, %s)", c.members[i].name, i+1, len(c.members), c.members[i].clientURL.String())
}

// ClientURLs returns every member's client URL, stopped members' included:
// what an apiserver of the cluster is configured with.
func (c *EtcdCluster) ClientURLs() []string {
	urls := make([]string, len(c.members))
	for i, m := range c.members {
		urls[i] = m.clientURL.String()
	}
	return urls
}

// Size is the number of members, stopped ones included.
func (c *EtcdCluster) Size() int { return len(c.members) }

// Running reports whether member i runs.
func (c *EtcdCluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running[i] != nil
}

// Leader returns the index of the member that every running member takes
// for the leader, polling until they agree on a running one (an election
// may be under way) for at most timeout.
func (c *EtcdCluster) Leader(timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		if i, ok := c.agreedLeader(); ok {
			return i, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("etcd: the running members agree on no leader after %v", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *EtcdCluster) agreedLeader() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	leader, agreed := -1, false
	for _, e := range c.running {
		if e == nil {
			continue
		}
		lead := e.Server.Leader()
		i := c.indexOf(lead)
		if i < 0 || c.running[i] == nil || (agreed && i != leader) {
			return -1, false
		}
		leader, agreed = i, true
	}
	return leader, agreed
}

// indexOf returns the index of the running member whose raft ID is id, or -1.
func (c *EtcdCluster) indexOf(id types.ID) int {
	for i, e := range c.running {
		if e != nil && e.Server.MemberID() == id {
			return i
		}
	}
	return -1
}

// StopMember stops member i as a crash would: its raft node stops at once,
// without handing its leadership on first (etcd's own Close of a leader
// transfers it, which makes a stop all but invisible to clients), so the
// others elect a new leader once their election timeout passes. Its client
// and peer listeners then close, which may wait for the clients' streams
// (a few seconds); meanwhile Leader already answers for the others. Its
// data stays, for StartMember. It returns how long the stop took.
func (c *EtcdCluster) StopMember(i int) (time.Duration, error) {
	c.mu.Lock()
	if i < 0 || i >= len(c.members) {
		c.mu.Unlock()
		return 0, fmt.Errorf("etcd: no member %d in a cluster of %d", i, len(c.members))
	}
	e := c.running[i]
	if e == nil {
		c.mu.Unlock()
		return 0, fmt.Errorf("etcd member %s is not running", c.describe(i))
	}
	start := time.Now()
	e.Server.HardStop()
	c.running[i] = nil
	closed := make(chan struct{})
	c.closing[i] = closed
	c.mu.Unlock()

	e.Close()
	close(closed)
	return time.Since(start), nil
}

// crash stops e's raft node at once, then closes e. Close alone would wait
// forever for a member that never became ready (it waits for client
// servers that start only once the member is ready), and would transfer a
// leader's leadership first. (StopMember does the same, in two steps.)
func crash(e *embed.Etcd) {
	e.Server.HardStop()
	e.Close()
}

// StartMember starts member i again, stopped by StopMember, on its data
// and its ports, and waits up to a minute for it to serve clients: it
// rejoins the cluster as a follower and catches up from the leader.
func (c *EtcdCluster) StartMember(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.members) {
		return fmt.Errorf("etcd: no member %d in a cluster of %d", i, len(c.members))
	}
	if c.running[i] != nil {
		return fmt.Errorf("etcd member %s is already running", c.describe(i))
	}
	if closed := c.closing[i]; closed != nil {
		<-closed // its data and ports are free once it has closed
	}
	e, err := embed.StartEtcd(c.config(i))
	if err != nil {
		return fmt.Errorf("restart etcd member %s: %w", c.describe(i), err)
	}
	if err := waitReady(e, etcdReadyTimeout); err != nil {
		return fmt.Errorf("restart etcd member %s: %w", c.describe(i), err)
	}
	c.running[i] = e
	return nil
}

// Stop stops every running member and removes the cluster's data.
func (c *EtcdCluster) Stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var wg sync.WaitGroup
	for i, e := range c.running {
		if e != nil {
			// Together: a member closing while the others still run
			// may wait on them.
			wg.Go(func() { crash(e) })
			c.running[i] = nil
		}
	}
	wg.Wait()
	for _, closed := range c.closing {
		if closed != nil {
			<-closed // a StopMember still closing its member
		}
	}
	os.RemoveAll(c.dir)
}
