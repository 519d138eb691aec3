package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	cgretry "k8s.io/client-go/util/retry"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// testApplyConflict has manager B apply a field that manager A owns, with
// Server-Side Apply on the real apiserver: a 409 that apierrors.IsConflict
// accepts, but that no retry can resolve, since B's apply is the same each
// time. It counts the PATCHes on the wire: client-go's RetryOnConflict
// sends Steps of them, all refused; this library's RetryOnConflict(WithContext)
// and UpdateOnConflict send one and return the error as it is, for which
// retry.IsApplyConflict holds (and not for a stale-resourceVersion
// Conflict from the same server, also checked).
func testApplyConflict(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "apply-")
	const name = "applied"

	var wire reqcount.Counter
	client, err := kubernetes.NewForConfig(wire.Config(s.Config))
	if err != nil {
		t.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps(ns)
	applyAs := func(ctx context.Context, manager, value string) (*corev1.ConfigMap, error) {
		return cms.Apply(ctx, corev1ac.ConfigMap(name, ns).WithData(map[string]string{"owner": value}),
			metav1.ApplyOptions{FieldManager: manager})
	}
	if _, err := applyAs(ctx, "manager-a", "a"); err != nil {
		t.Fatal(err)
	}
	patches := func() int { return wire.Outcomes().Status("patch", "configmaps", reqcount.AnyCode) }
	refused := func() int { return wire.Outcomes().Status("patch", "configmaps", 409) }

	// A fast backoff: what is counted is attempts, not time.
	backoff := retry.Backoff{Steps: 5, Duration: time.Millisecond, Factor: 1, Jitter: 0.1}

	runs := []struct {
		name string
		run  func() error
		want int // PATCHes on the wire
	}{
		{"client-go RetryOnConflict", func() error {
			return cgretry.RetryOnConflict(cgretry.DefaultRetry, func() error {
				_, err := applyAs(ctx, "manager-b", "b")
				return err
			})
		}, cgretry.DefaultRetry.Steps},
		{"retry.RetryOnConflict", func() error {
			return retry.RetryOnConflict(backoff, func() error {
				_, err := applyAs(ctx, "manager-b", "b")
				return err
			})
		}, 1},
		{"retry.RetryOnConflictWithContext", func() error {
			return retry.RetryOnConflictWithContext(ctx, backoff, func(ctx context.Context) error {
				_, err := applyAs(ctx, "manager-b", "b")
				return err
			})
		}, 1},
		{"retry.UpdateOnConflict, update an apply", func() error {
			_, err := retry.UpdateOnConflict(ctx, backoff, (*corev1.ConfigMap)(nil),
				func(ctx context.Context) (*corev1.ConfigMap, error) { return cms.Get(ctx, name, metav1.GetOptions{}) },
				func(cm *corev1.ConfigMap) error { cm.Data["owner"] = "b"; return nil },
				func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
					return applyAs(ctx, "manager-b", cm.Data["owner"])
				})
			return err
		}, 1},
	}
	for _, r := range runs {
		p0, r0 := patches(), refused()
		err := r.run()
		sent, was409 := patches()-p0, refused()-r0
		t.Logf("%s: %d PATCHes on the wire (%d refused with 409), then %v", r.name, sent, was409, err)
		if sent != r.want || was409 != r.want {
			t.Errorf("%s: %d PATCHes, %d of them 409, want %d and %d", r.name, sent, was409, r.want, r.want)
		}
		if !apierrors.IsConflict(err) || !retry.IsApplyConflict(err) {
			t.Errorf("%s: IsConflict %v, IsApplyConflict %v on %v, want both true", r.name, apierrors.IsConflict(err), retry.IsApplyConflict(err), err)
		}
		if retry.IsTransient(err) {
			t.Errorf("%s: IsTransient true on an apply conflict", r.name)
		}
		var status apierrors.APIStatus
		if !errors.As(err, &status) || !hasCause(status.Status(), metav1.CauseTypeFieldManagerConflict) {
			t.Errorf("%s: %v carries no %s cause", r.name, err, metav1.CauseTypeFieldManagerConflict)
		}
	}

	// The control: a stale resourceVersion on a PUT, also 409 Conflict, is
	// not an apply conflict, and it is what RetryOnConflict is for.
	stale, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applyAs(ctx, "manager-a", "a2"); err != nil {
		t.Fatal(err)
	}
	stale.Data["other"] = "x"
	_, err = cms.Update(ctx, stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) || retry.IsApplyConflict(err) {
		t.Errorf("a stale PUT: IsConflict %v, IsApplyConflict %v on %v, want true and false", apierrors.IsConflict(err), retry.IsApplyConflict(err), err)
	}
	live, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if live.Data["owner"] != "a2" {
		t.Errorf("the field is %q, want manager A's %q: a refused apply changed it", live.Data["owner"], "a2")
	}
}

// hasCause reports whether status lists a cause of type typ.
func hasCause(status metav1.Status, typ metav1.CauseType) bool {
	if status.Details == nil {
		return false
	}
	for _, c := range status.Details.Causes {
		if c.Type == typ {
			return true
		}
	}
	return false
}
