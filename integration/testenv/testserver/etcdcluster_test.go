package testserver

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestMain(m *testing.M) {
	QuietGlobalLogs() // the etcd clients' gRPC logs
	os.Exit(m.Run())
}

// memberClient is an etcd client of member i alone, closed when t ends.
func memberClient(t *testing.T, c *EtcdCluster, i int) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{c.ClientURLs()[i]}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestEtcdClusterLeaderCrash starts three members, writes through one and
// reads through another, crashes the leader, and checks that the other two
// elect a new one and take writes, and that the old leader, started again,
// rejoins and serves what was written while it was down.
func TestEtcdClusterLeaderCrash(t *testing.T) {
	start := time.Now()
	c, err := StartEtcdCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop) // after the clients close: etcd waits for their streams

	t.Logf("3 members ready in %v", time.Since(start).Round(time.Millisecond))
	for _, u := range c.ClientURLs() {
		if !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Fatalf("client URL %s is not on loopback", u)
		}
	}

	leader, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	follower, other := (leader+1)%3, (leader+2)%3
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := memberClient(t, c, follower).Put(ctx, "before", "1"); err != nil {
		t.Fatalf("put through member %d: %v", follower, err)
	}
	if got, err := memberClient(t, c, other).Get(ctx, "before"); err != nil || len(got.Kvs) != 1 {
		t.Fatalf("get through member %d: %v, %v", other, got, err)
	}

	crash := time.Now()
	closing, err := c.StopMember(leader)
	if err != nil {
		t.Fatal(err)
	}
	if c.Running(leader) {
		t.Fatalf("member %d runs after StopMember", leader)
	}
	if _, err := c.StopMember(leader); err == nil {
		t.Errorf("a second StopMember of member %d returned nil", leader)
	}
	next, err := c.Leader(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	elected := time.Since(crash)
	if next == leader {
		t.Fatalf("member %d is leader again while stopped", leader)
	}
	if _, err := memberClient(t, c, next).Put(ctx, "during", "2"); err != nil {
		t.Fatalf("put after the crash through member %d: %v", next, err)
	}

	restart := time.Now()
	if err := c.StartMember(leader); err != nil {
		t.Fatal(err)
	}
	rejoined := time.Since(restart)
	if err := c.StartMember(leader); err == nil {
		t.Errorf("StartMember of a running member returned nil")
	}
	// A linearizable read through the restarted member: it has caught up.
	got, err := memberClient(t, c, leader).Get(ctx, "during")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "2" {
		t.Fatalf("get through the restarted member %d: %v, %v", leader, got, err)
	}
	if _, err := c.Leader(10 * time.Second); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	t.Logf("leader %d crashed (the stop took %v); member %d leader %v after the crash; the old leader ready %v after its restart",
		leader, closing.Round(time.Millisecond), next, elected.Round(time.Millisecond), rejoined.Round(time.Millisecond))
}

// TestEtcdClusterStartFailureNamesMember gives the second member a client
// port that is taken: the start fails at once, naming that member.
func TestEtcdClusterStartFailureNamesMember(t *testing.T) {
	ports, err := freePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ports[2] = taken.Addr().(*net.TCPAddr).Port

	start := time.Now()
	c, err := startClusterOnce(ports, 10*time.Second)
	if err == nil {
		c.Stop()
		t.Fatal("a cluster with a member's port taken started")
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the failed start took %v", took)
	}
	if !strings.Contains(err.Error(), "etcd member kuberetry-1 (2 of 3") {
		t.Errorf("error %q does not name member kuberetry-1", err)
	}
}

func TestEtcdClusterSize(t *testing.T) {
	for _, n := range []int{0, 2, 4, 7, -1} {
		if _, err := StartEtcdCluster(n); err == nil || !strings.Contains(err.Error(), "want 1, 3 or 5") {
			t.Errorf("StartEtcdCluster(%d): %v, want an error naming the sizes allowed", n, err)
		}
	}
}
