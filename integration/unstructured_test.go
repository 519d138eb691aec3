package integration_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// testUnstructuredNoop writes a Deployment through the dynamic client as
// *unstructured.Unstructured, whose stored numbers decode as int64 while
// the same numbers from YAML or arithmetic are float64. It checks, on the
// wire: the server itself sees a PUT of a float64 of the stored value as
// no change (the resourceVersion stays), so that PUT is a wasted request;
// UpdateOnConflict sends none for it, at the top level (spec.replicas) or
// deep in a list (a container port); a real change sends exactly one PUT.
func testUnstructuredNoop(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "unstructured-")
	const name = "web"
	if _, err := s.Client.AppsV1().Deployments(ns).Create(ctx, testDeployment(name, 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var wire reqcount.Counter
	dyn, err := dynamic.NewForConfig(wire.Config(s.Config))
	if err != nil {
		t.Fatal(err)
	}
	deps := dyn.Resource(deploymentsGVR).Namespace(ns)
	get := func(ctx context.Context) (*unstructured.Unstructured, error) {
		return deps.Get(ctx, name, metav1.GetOptions{})
	}
	update := func(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return deps.Update(ctx, u, metav1.UpdateOptions{})
	}
	stored, err := get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedFieldNoCopy(stored.Object, "spec", "replicas"); r != int64(2) {
		t.Fatalf("stored spec.replicas decoded as %T %v, want int64 2: the test's premise is gone", r, r)
	}
	getsAndPuts := func(c reqcount.Counts) (int, int) {
		return c[reqcount.Key{Verb: "get", Resource: "deployments"}], c[reqcount.Key{Verb: "update", Resource: "deployments"}]
	}

	// The premise: a PUT of the float64 is a request the server finds
	// nothing in.
	before := wire.Snapshot()
	plain := stored.DeepCopy()
	if err := unstructured.SetNestedField(plain.Object, float64(2), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	put, err := update(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	_, puts := getsAndPuts(wire.Snapshot().Sub(before))
	if puts != 1 || put.GetResourceVersion() != stored.GetResourceVersion() {
		t.Fatalf("a plain PUT of replicas as float64: %d PUTs, resourceVersion %s -> %s; want 1 PUT and no new version",
			puts, stored.GetResourceVersion(), put.GetResourceVersion())
	}

	cases := []struct {
		name     string
		current  *unstructured.Unstructured // nil: the first attempt calls get
		mutate   func(*unstructured.Unstructured) error
		wantGets int
		wantPuts int
		replicas int64
		port     int64
	}{
		{"replicas float64 of the stored int64", nil, setReplicas(2), 1, 0, 2, 80},
		{"replicas float64, current from a cache", stored, setReplicas(2), 0, 0, 2, 80},
		{"containerPort float64 in a list", nil, setPort(80), 1, 0, 2, 80},
		{"replicas changed", nil, setReplicas(3), 1, 1, 3, 80},
	}
	for _, c := range cases {
		before := wire.Snapshot()
		got, err := retry.UpdateOnConflict(ctx, retry.DefaultRetry, c.current, get, c.mutate, update)
		gets, puts := getsAndPuts(wire.Snapshot().Sub(before))
		t.Logf("%s: %d GET, %d PUT on the wire, err %v", c.name, gets, puts, err)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if gets != c.wantGets || puts != c.wantPuts {
			t.Errorf("%s: %d GETs and %d PUTs on the wire, want %d and %d", c.name, gets, puts, c.wantGets, c.wantPuts)
		}
		live, err := s.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, p := int64(*live.Spec.Replicas), int64(live.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort); r != c.replicas || p != c.port {
			t.Errorf("%s: the server holds replicas %d, port %d; want %d, %d", c.name, r, p, c.replicas, c.port)
		}
		if gr, _, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "replicas"); toFloat(gr) != float64(c.replicas) {
			t.Errorf("%s: returned object has replicas %v, want %d", c.name, gr, c.replicas)
		}
	}
}

// setReplicas sets spec.replicas to n as a float64, as a value read from
// YAML or JSON into an interface is.
func setReplicas(n float64) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		return unstructured.SetNestedField(u.Object, n, "spec", "replicas")
	}
}

// setPort sets the first container's first containerPort to n as a
// float64, a number inside a list inside maps.
func setPort(n float64) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		containers, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return err
		}
		c := containers[0].(map[string]any)
		ports := c["ports"].([]any)
		ports[0].(map[string]any)["containerPort"] = n
		return unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
	}
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return -1
}

// testDeployment returns a Deployment of one container listening on port
// 80. No controller runs in these tests, so it never starts a pod.
func testDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "registry.k8s.io/pause:3.10",
					Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				}}},
			},
		},
	}
}
