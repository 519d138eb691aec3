package integration_test

import (
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// etcd is shared by every apiserver in this test binary; TestMain starts it
// once and removes its data when the tests are done.
var etcd *testserver.Etcd

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testserver.QuietGlobalLogs()
	e, err := testserver.StartEtcd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Stop()
	etcd = e
	return m.Run()
}

// startServer starts a kube-apiserver for t, stopped when t ends. The
// server's log, a few hundred lines per start, is kept out of the test
// output unless t fails.
func startServer(t *testing.T, flags ...string) *testserver.Server {
	t.Helper()
	s, err := testserver.Start(testserver.BufferLogs(t), etcd, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSmoke proves the harness: a real apiserver on a real etcd that a
// client-go clientset can write to and read back from.
func TestSmoke(t *testing.T) {
	s := startServer(t)
	ctx := t.Context()
	ns := createNamespace(t, s, "smoke-")

	cm, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
		Data:       map[string]string{"hello": "world"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	got, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, "smoke", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap: %v", err)
	}
	if got.Data["hello"] != "world" || got.UID != cm.UID {
		t.Fatalf("read back %v (uid %s), want hello=world (uid %s)", got.Data, got.UID, cm.UID)
	}
}

// createNamespace creates a namespace named from prefix and returns its name.
func createNamespace(t *testing.T, s *testserver.Server, prefix string) string {
	t.Helper()
	ns, err := s.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}
