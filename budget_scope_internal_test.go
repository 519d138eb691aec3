package retry

import (
	"net/http"
	"testing"
)

// TestScopesOf: the scopes of a request on the wire, path by path.
func TestScopesOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, url string
		want        string // the resource scope's name; "" for none
	}{
		{"GET", "https://h:6443/api/v1/namespaces/default/configmaps/cm", "reads of configmaps"},
		{"PUT", "https://h:6443/api/v1/namespaces/default/configmaps/cm", "writes of configmaps"},
		{"HEAD", "https://h:6443/api/v1/namespaces/default/configmaps", "reads of configmaps"},
		{"POST", "https://h:6443/api/v1/namespaces/default/configmaps", "writes of configmaps"},
		{"PATCH", "https://h:6443/apis/apps/v1/namespaces/ns/deployments/d", "writes of deployments.apps"},
		{"DELETE", "https://h:6443/apis/apps/v1/namespaces/ns/deployments/d", "writes of deployments.apps"},
		{"PUT", "https://h:6443/apis/apps/v1/namespaces/ns/deployments/d/status", "writes of deployments.apps"},
		{"GET", "https://h:6443/apis/apps/v1/deployments", "reads of deployments.apps"},
		{"GET", "https://h:6443/api/v1/nodes/n1", "reads of nodes"},
		{"GET", "https://h:6443/api/v1/nodes/n1/proxy/metrics", "reads of nodes"},
		{"GET", "https://h:6443/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", "reads of clusterroles.rbac.authorization.k8s.io"},
		{"GET", "https://h:6443/api/v1/namespaces", "reads of namespaces"},
		{"GET", "https://h:6443/api/v1/namespaces/ns", "reads of namespaces"},
		{"GET", "https://h:6443/api/v1/namespaces/ns/", "reads of namespaces"},
		{"PUT", "https://h:6443/api/v1/namespaces/ns/status", "writes of namespaces"},
		{"PUT", "https://h:6443/api/v1/namespaces/ns/finalize", "writes of namespaces"},
		{"GET", "https://h:6443/api/v1/namespaces/ns/secrets", "reads of secrets"},
		{"GET", "https://h:6443/api/v1/watch/namespaces/ns/pods", "reads of pods"},
		{"GET", "https://h:6443/api/v1/watch/pods", "reads of pods"},
		{"GET", "https://h:6443/apis/apps/v1/watch/namespaces/ns/deployments/d", "reads of deployments.apps"},
		{"GET", "https://h:6443/api/v1/pods?watch=true", "reads of pods"},
		{"GET", "https://h:6443/apis/metrics.k8s.io", "reads of metrics.k8s.io"},
		{"GET", "https://h:6443/apis/metrics.k8s.io/", "reads of metrics.k8s.io"},
		{"GET", "https://h:6443/apis/metrics.k8s.io/v1beta1", "reads of metrics.k8s.io"},
		{"GET", "https://h:6443/apis/metrics.k8s.io/v1beta1/", "reads of metrics.k8s.io"},
		{"GET", "https://h:6443/apis/metrics.k8s.io/v1beta1/pods", "reads of pods.metrics.k8s.io"},
		{"GET", "https://h:6443/api", ""},
		{"GET", "https://h:6443/api/", ""},
		{"GET", "https://h:6443/api/v1", ""},
		{"GET", "https://h:6443/api/v1/", ""},
		{"GET", "https://h:6443/apis", ""},
		{"GET", "https://h:6443/apis/", ""},
		{"GET", "https://h:6443/healthz", ""},
		{"GET", "https://h:6443/version", ""},
		{"GET", "https://h:6443/openapi/v2", ""},
		{"GET", "https://h:6443/openapi/v3/apis/apps/v1", ""},
		{"GET", "https://h:6443/", ""},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, tt.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		server, resource := scopesOf(req)
		if got := server.String(); got != "https://h:6443" {
			t.Errorf("%s %s: server %q, want https://h:6443", tt.method, tt.url, got)
		}
		got := ""
		if resource.kind != noScope {
			got = resource.String()
			if resource.scheme != server.scheme || resource.host != server.host {
				t.Errorf("%s %s: resource scope on %s://%s, want the server's", tt.method, tt.url, resource.scheme, resource.host)
			}
		}
		if got != tt.want {
			t.Errorf("%s %s: resource scope %q, want %q", tt.method, tt.url, got, tt.want)
		}
	}
}

// TestScopeKeys: the scopes of one resource on two servers, of two verb
// classes, of two groups, are distinct keys; those of two objects of one
// resource are one.
func TestScopeKeys(t *testing.T) {
	t.Parallel()
	scopeOf := func(method, url string) scope {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, s := scopesOf(req)
		return s
	}
	base := scopeOf("GET", "https://a/api/v1/namespaces/x/secrets/s1")
	if base != scopeOf("GET", "https://a/api/v1/namespaces/y/secrets/s2") {
		t.Error("two Secrets' reads are two scopes, want one")
	}
	for _, other := range []scope{
		scopeOf("PUT", "https://a/api/v1/namespaces/x/secrets/s1"),
		scopeOf("GET", "https://b/api/v1/namespaces/x/secrets/s1"),
		scopeOf("GET", "https://a/apis/example.com/v1/namespaces/x/secrets/s1"),
		scopeOf("GET", "https://a/apis/example.com/v1"),
	} {
		if base == other {
			t.Errorf("%v and %v are one scope, want two", base, other)
		}
	}
}
