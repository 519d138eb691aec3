package integration_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// raceBackoff is the backoff for 16 racing writers: 30 attempts,
// no Cap.
var raceBackoff = retry.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.2, Jitter: 1.0}

// testCreateOrUpdateRace releases 16 goroutines together, each calling
// CreateOrUpdate on one ConfigMap that does not exist yet and adding a key
// of its own. It checks that all of them return nil, exactly one created
// the object and the 15 others updated it, the object holds the 16 keys,
// and, on the wire, exactly one POST succeeded, every other POST was a 409
// AlreadyExists that the loser's create saw, every Conflict the update
// path met was a PUT 409, each attempt read once (the caller's object has
// no resourceVersion), and each loser posted at most once.
func testCreateOrUpdateRace(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "race-")
	const name, writers = "shared", 16

	var wire reqcount.Counter
	client, err := kubernetes.NewForConfig(wire.Config(s.Config))
	if err != nil {
		t.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps(ns)

	type call struct {
		result                                 retry.Result
		err                                    error
		gets, notFound, creates, alreadyExists int
		updates, conflicts, mutates            int
	}
	calls := make([]call, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &calls[i]
			key := fmt.Sprintf("writer-%02d", i)
			desired := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
			<-start
			_, c.result, c.err = retry.CreateOrUpdate(ctx, raceBackoff, desired,
				func(ctx context.Context) (*corev1.ConfigMap, error) {
					c.gets++
					cm, err := cms.Get(ctx, name, metav1.GetOptions{})
					if apierrors.IsNotFound(err) {
						c.notFound++
					}
					return cm, err
				},
				func(cm *corev1.ConfigMap) error {
					c.mutates++
					if cm.Data == nil {
						cm.Data = map[string]string{}
					}
					cm.Data[key] = "set"
					return nil
				},
				func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
					c.creates++
					created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
					if apierrors.IsAlreadyExists(err) {
						c.alreadyExists++
					}
					return created, err
				},
				func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
					c.updates++
					updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
					if apierrors.IsConflict(err) {
						c.conflicts++
					}
					return updated, err
				})
		}()
	}
	close(start)
	wg.Wait()

	var sum call
	results := map[retry.Result]int{}
	maxAttempts := 0
	for i, c := range calls {
		if c.err != nil {
			t.Errorf("writer %d: %v", i, c.err)
		}
		results[c.result]++
		sum.gets += c.gets
		sum.notFound += c.notFound
		sum.creates += c.creates
		sum.alreadyExists += c.alreadyExists
		sum.updates += c.updates
		sum.conflicts += c.conflicts
		sum.mutates += c.mutates
		maxAttempts = max(maxAttempts, c.gets)
		if c.creates > 1 {
			t.Errorf("writer %d posted %d times: after AlreadyExists the object exists, so it can only update", i, c.creates)
		}
	}
	onWire := wire.Outcomes()
	posts, posted := onWire.Status("create", "configmaps", reqcount.AnyCode), onWire.Status("create", "configmaps", 201)
	post409, getAll, get404 := onWire.Status("create", "configmaps", 409), onWire.Status("get", "configmaps", reqcount.AnyCode), onWire.Status("get", "configmaps", 404)
	puts, put200, put409 := onWire.Status("update", "configmaps", reqcount.AnyCode), onWire.Status("update", "configmaps", 200), onWire.Status("update", "configmaps", 409)
	t.Logf("%d writers: results %v; loops: %d gets (%d NotFound), %d creates (%d AlreadyExists), %d updates (%d Conflicts), at most %d attempts in a call",
		writers, results, sum.gets, sum.notFound, sum.creates, sum.alreadyExists, sum.updates, sum.conflicts, maxAttempts)
	t.Logf("on the wire: %d POST (%d created, %d 409), %d GET (%d 404), %d PUT (%d 200, %d 409); %.2f requests per call",
		posts, posted, post409, getAll, get404, puts, put200, put409, float64(posts+getAll+puts)/writers)

	if results[retry.ResultCreated] != 1 || results[retry.ResultUpdated] != writers-1 {
		t.Errorf("results %v, want 1 %s and %d %s", results, retry.ResultCreated, writers-1, retry.ResultUpdated)
	}
	final, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(final.Data) != writers {
		t.Errorf("the object holds %d keys, want %d: %v", len(final.Data), writers, final.Data)
	}
	for i := range writers {
		if final.Data[fmt.Sprintf("writer-%02d", i)] != "set" {
			t.Errorf("writer %d's key is missing", i)
		}
	}
	// The wire agrees with the loops: one successful POST, every other one
	// an AlreadyExists a loser saw; one GET per attempt, a 404 for each
	// that took the create path; every PUT that did not succeed a Conflict.
	switch {
	case posted != 1:
		t.Errorf("%d POSTs created the object, want exactly 1", posted)
	case posts != sum.creates || post409 != sum.alreadyExists || posts != posted+post409:
		t.Errorf("%d POSTs (%d 409) on the wire; the loops created %d times and saw %d AlreadyExists", posts, post409, sum.creates, sum.alreadyExists)
	case sum.alreadyExists > writers-1:
		t.Errorf("%d AlreadyExists among %d writers, at most %d can lose the create", sum.alreadyExists, writers, writers-1)
	}
	if getAll != sum.gets || get404 != sum.notFound || get404 != sum.creates {
		t.Errorf("%d GETs (%d 404) on the wire; the loops read %d times, %d NotFound, and created %d times", getAll, get404, sum.gets, sum.notFound, sum.creates)
	}
	if sum.mutates != sum.gets {
		t.Errorf("%d mutates for %d reads: an object built by the caller is read on every attempt", sum.mutates, sum.gets)
	}
	if puts != sum.updates || put409 != sum.conflicts || put200 != writers-1 || puts != put200+put409 {
		t.Errorf("%d PUTs (%d 200, %d 409) on the wire; the loops updated %d times with %d Conflicts, want %d successes", puts, put200, put409, sum.updates, sum.conflicts, writers-1)
	}
	if maxAttempts > raceBackoff.Steps {
		t.Errorf("a call made %d attempts, more than Steps %d", maxAttempts, raceBackoff.Steps)
	}
	if sum.alreadyExists+sum.conflicts == 0 {
		t.Error("16 writers released together met neither AlreadyExists nor Conflict: the test proves nothing about the races")
	}
}

// testCreateOrUpdateFromDeletedCache passes CreateOrUpdate an object from
// an informer's cache after the server deleted it, with a mutate that
// changes it: the update gets NotFound, the next attempt reads NotFound
// and creates the object from the cached copy, which the server accepts.
// It checks the requests on the wire (PUT 404, GET 404, POST 201), that
// the new object is a new one (new uid), carries mutate's change and the
// cached data, that its managed fields name the creating manager only
// (none left to first-writer for the field mutate dropped), and that the
// cache's object was not modified.
func testCreateOrUpdateFromDeletedCache(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "deleted-")
	const name = "child"
	lister := startInformer(t, ctx, s.Client, ns)
	orig, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "x"}},
		Data:       map[string]string{"kept": "yes", "dropped": "yes"},
	}, metav1.CreateOptions{FieldManager: "first-writer"})
	if err != nil {
		t.Fatal(err)
	}
	var cached *corev1.ConfigMap
	if err := poll.Until(ctx, 10*time.Millisecond, 20*time.Second, func() bool { cached, err = lister.Get(name); return err == nil }); err != nil {
		t.Fatalf("the informer never saw %s: %v", name, err)
	}
	snapshot := cached.DeepCopy()
	if err := s.Client.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	var wire reqcount.Counter
	client, err := kubernetes.NewForConfig(wire.Config(s.Config))
	if err != nil {
		t.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps(ns)
	got, result, err := retry.CreateOrUpdate(ctx, retry.DefaultRetry, cached,
		func(ctx context.Context) (*corev1.ConfigMap, error) { return cms.Get(ctx, name, metav1.GetOptions{}) },
		func(cm *corev1.ConfigMap) error {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data["reconciled"] = "yes"
			// A field the copy's managedFields credit to first-writer and
			// the new object lacks: a stale entry would keep it.
			delete(cm.Data, "dropped")
			return nil
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "reconciler"})
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			return cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "reconciler"})
		})
	onWire := wire.Outcomes()
	t.Logf("result %s, err %v; on the wire: %s", result, err, onWire)
	if err != nil || result != retry.ResultCreated {
		t.Fatalf("CreateOrUpdate from a deleted cached object: %s, %v; want %s, nil", result, err, retry.ResultCreated)
	}
	if n := [3]int{onWire.Status("update", "configmaps", 404), onWire.Status("get", "configmaps", 404), onWire.Status("create", "configmaps", 201)}; n != [3]int{1, 1, 1} {
		t.Errorf("PUT 404, GET 404, POST 201: %v, want one each", n)
	}
	if total := onWire.Status("update", "configmaps", reqcount.AnyCode) + onWire.Status("get", "configmaps", reqcount.AnyCode) + onWire.Status("create", "configmaps", reqcount.AnyCode); total != 3 {
		t.Errorf("%d ConfigMap requests, want 3: %s", total, onWire)
	}
	if got.UID == orig.UID || got.Data["kept"] != "yes" || got.Data["reconciled"] != "yes" || got.Data["dropped"] != "" || got.Labels["app"] != "x" {
		t.Errorf("recreated object: uid %s (old %s), data %v, labels %v; want a new uid, the cached data and mutate's key",
			got.UID, orig.UID, got.Data, got.Labels)
	}
	for _, m := range got.ManagedFields {
		if m.Manager != "reconciler" {
			t.Errorf("the recreated object's fields are attributed to %q (%s at %v) too: a stale managedFields entry from the cache", m.Manager, m.Operation, m.Time)
		}
	}
	if !equality.Semantic.DeepEqual(cached, snapshot) {
		t.Error("CreateOrUpdate modified the informer's cached object")
	}
}
