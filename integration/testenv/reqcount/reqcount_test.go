package reqcount

import (
	"net/http/httptest"
	"testing"
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
