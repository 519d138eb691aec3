package main

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kuberetry/retry/integration/testenv/contention"
	"github.com/kuberetry/retry/integration/testenv/testserver"
	"github.com/kuberetry/retry/lab/internal/cluster"
)

// checkTable checks that out is the demo's table with one row per
// strategy and writer count and a create-or-update race per writer count,
// and that each row's requests per update is one the row's loop can have
// made: a read and a write per success for the loops that read in every
// attempt and for the race (a GET, then a POST or a PUT), at least the
// write for UpdateOnConflict.
func checkTable(t *testing.T, out string, writerCounts int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if strings.HasPrefix(lines[len(lines)-1], connectionsLine) {
		lines = lines[:len(lines)-1] // an HA control plane's; checkHA checks it
	}
	// Title, blank line, header, rows, blank line, two lines on the race.
	want := 3 + writerCounts*(len(strategies)+1) + 3
	if len(lines) != want {
		t.Fatalf("%d lines of output, want %d:\n%s", len(lines), want, out)
	}
	header := strings.Fields(lines[2])
	if header[0] != "backoff" || header[len(header)-1] != "wall" || header[len(header)-4] != "requests/update" {
		t.Errorf("header %q", lines[2])
	}
	for _, s := range strategies {
		if n := strings.Count(out, s.Name); n != writerCounts {
			t.Errorf("%d rows for %s, want %d:\n%s", n, s.Name, writerCounts, out)
		}
	}
	if n := strings.Count(out, raceName+" "); n != writerCounts {
		t.Errorf("%d rows for %s, want %d:\n%s", n, raceName, writerCounts, out)
	}
	for _, line := range lines[3 : len(lines)-3] {
		line = strings.TrimSpace(line) // the table aligns right, names too
		var s *contention.Strategy
		for i := range strategies {
			if strings.HasPrefix(line, strategies[i].Name+" ") {
				s = &strategies[i]
			}
		}
		race := strings.HasPrefix(line, raceName+" ")
		if s == nil && !race {
			t.Errorf("row of no strategy: %q", line)
			continue
		}
		f := strings.Fields(line)
		succeeded, reqs := f[len(f)-8], f[len(f)-4] // counted from the right: names have spaces
		if succeeded == "0" {
			if reqs != "-" {
				t.Errorf("%s: nothing succeeded but %s requests per update", line, reqs)
			}
			continue
		}
		r, err := strconv.ParseFloat(reqs, 64)
		least := 2.0 // GET and PUT, or GET and POST
		if s != nil && (s.Update != nil || s.ForWriter != nil) {
			least = 1 // PUT
		}
		if err != nil || r < least {
			t.Errorf("%q: requests/update %q, want a number of at least %v", line, reqs, least)
		}
	}
}

// TestInProcess runs the demo as make demo does, smaller.
func TestInProcess(t *testing.T) {
	var out, log bytes.Buffer
	err := run(t.Context(), []string{"--writers", "2,8", "--updates", "3"}, "", &out, cluster.NewProgress(&log))
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("\n%s", out.String())
	checkTable(t, out.String(), 2)
	if !strings.Contains(log.String(), "deleted namespace") {
		t.Errorf("no cleanup reported:\n%s", log.String())
	}
}

// TestHA runs the demo on an HA control plane of two apiservers, and
// checks that the writers' connections went to both.
func TestHA(t *testing.T) {
	var out, log bytes.Buffer
	err := run(t.Context(), []string{"--apiservers=2", "--writers", "4", "--updates", "2"}, "", &out, cluster.NewProgress(&log))
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("\n%s", out.String())
	checkTable(t, out.String(), 1)
	if !strings.Contains(out.String(), "2 kube-apiserver(s) on a 3-member embedded etcd") {
		t.Errorf("the title does not name the HA control plane:\n%s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var a, b int
	last := lines[len(lines)-1]
	if _, err := fmt.Sscanf(strings.TrimPrefix(last, connectionsLine), " [%d %d]", &a, &b); err != nil || a == 0 || b == 0 {
		t.Errorf("last line %q: want connections to both apiservers (%v)", last, err)
	}
}

// TestAPIServersUsage checks that --apiservers outside 1 to 5 is a usage
// error that starts nothing (contention's TestClusterFlags checks the rest).
func TestAPIServersUsage(t *testing.T) {
	var out, log bytes.Buffer
	err := run(t.Context(), []string{"--apiservers=6"}, "", &out, cluster.NewProgress(&log))
	if err == nil || !strings.Contains(err.Error(), "--apiservers 6") {
		t.Errorf("--apiservers=6: %v, want an error naming --apiservers 6", err)
	}
	if log.Len() > 0 || out.Len() > 0 {
		t.Errorf("wrote %q and %q, want nothing started", out.String(), log.String())
	}
}

// TestKubeconfig runs the demo against a cluster given by a kubeconfig
// and checks that it deletes the namespace it made there.
func TestKubeconfig(t *testing.T) {
	etcd, err := testserver.StartEtcd()
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Stop()
	tb := testserver.NewProcessTB(io.Discard)
	defer tb.Close() // stops the server
	s, err := testserver.Start(tb, etcd)
	if err != nil {
		t.Fatal(err)
	}

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	err = clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"test": {
			Server:                   s.Config.Host,
			CertificateAuthorityData: s.Config.CAData,
			TLSServerName:            s.Config.ServerName,
		}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"test": {Token: s.Config.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"test": {Cluster: "test", AuthInfo: "test"}},
		CurrentContext: "test",
	}, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}

	var out, log bytes.Buffer
	// Through KUBECONFIG, as a user with a cluster would run it.
	if err := run(t.Context(), []string{"--writers", "4", "--updates", "3"}, kubeconfig, &out, cluster.NewProgress(&log)); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	checkTable(t, out.String(), 1)
	if !strings.Contains(out.String(), s.Config.Host) {
		t.Errorf("table title does not name the cluster %s:\n%s", s.Config.Host, out.String())
	}

	nss, err := s.Client.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ns := range nss.Items {
		if strings.HasPrefix(ns.Name, "kuberetry-contention-") {
			found = true
			// No namespace controller runs here, so the namespace
			// stays Terminating; it was deleted all the same.
			if ns.DeletionTimestamp == nil {
				t.Errorf("namespace %s was not deleted", ns.Name)
			}
		}
	}
	if !found {
		t.Error("the demo made no namespace on the cluster")
	}
}
