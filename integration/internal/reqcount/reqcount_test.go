package reqcount

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		method, target string
		want           Key
	}{
		{"GET", "/api/v1/namespaces/ns/configmaps/c", Key{"get", "configmaps"}},
		{"PUT", "/api/v1/namespaces/ns/configmaps/c", Key{"update", "configmaps"}},
		{"GET", "/api/v1/namespaces/ns/configmaps?limit=500", Key{"list", "configmaps"}},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=1", Key{"watch", "configmaps"}},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=1", Key{"watch", "configmaps"}},
		{"POST", "/api/v1/namespaces/ns/configmaps", Key{"create", "configmaps"}},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/status", Key{"patch", "deployments"}},
		{"DELETE", "/api/v1/namespaces/ns", Key{"delete", "namespaces"}},
		{"DELETE", "/api/v1/namespaces/ns/configmaps", Key{"deletecollection", "configmaps"}},
		{"POST", "/api/v1/namespaces", Key{"create", "namespaces"}},
		{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles", Key{"list", "clusterroles"}},
		{"GET", "/api/v1", Key{"get", ""}},
		{"GET", "/apis/apps/v1", Key{"get", ""}},
		{"GET", "/version", Key{"get", ""}},
	}
	for _, tc := range tests {
		if got := Classify(httptest.NewRequest(tc.method, tc.target, nil)); got != tc.want {
			t.Errorf("%s %s: %+v, want %+v", tc.method, tc.target, got, tc.want)
		}
	}
}

// TestCounter sends requests through a counted rest.Config to a local
// server and checks what was counted, failed requests included.
func TestCounter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
	}))
	defer srv.Close()

	var c Counter
	cfg := c.Config(&rest.Config{Host: srv.URL})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	send := func(method, path string) {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send("GET", "/api/v1/namespaces/ns/configmaps/c")
	before := c.Snapshot()
	send("PUT", "/api/v1/namespaces/ns/configmaps/c")
	send("PUT", "/api/v1/namespaces/ns/configmaps/c")
	send("GET", "/api/v1/namespaces/ns/configmaps/c")

	got := c.Snapshot().Sub(before)
	want := Counts{{"update", "configmaps"}: 2, {"get", "configmaps"}: 1}
	if len(got) != len(want) || got[Key{"update", "configmaps"}] != 2 || got[Key{"get", "configmaps"}] != 1 {
		t.Errorf("counted %v, want %v", got, want)
	}
	if n := got.Resource("configmaps"); n != 3 {
		t.Errorf("%d configmaps requests, want 3", n)
	}
	if n := c.Snapshot()[Key{"get", "configmaps"}]; n != 2 {
		t.Errorf("%d gets in all, want 2", n)
	}
}
