package integration_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// childKeeper is a controller-runtime reconciler that keeps a child
// ConfigMap, owned by a parent ConfigMap, whose data mirrors the parent's
// valueKey, with retry.CreateOrUpdate: current from the manager's cached
// client (the child as the cache has it, or an object naming it when the
// cache has none), get through the manager's API reader. It counts what
// every call did.
type childKeeper struct {
	parent, child types.NamespacedName
	cached        client.Client // the manager's client: reads from its cache
	live          client.Reader // the manager's API reader: reads from the server
	scheme        *runtime.Scheme

	mu         sync.Mutex
	reconciles int // CreateOrUpdate calls, each after one cache read of the child
	fromCache  int // calls whose current was a stored object from the cache
	attempts   int // calls of mutate: one per attempt
	gets       int // calls of get, each a read through the API reader
	notFound   int // gets that returned NotFound
	creates    int
	exists     int // creates that met AlreadyExists
	updates    int
	conflicts  int // updates that met a Conflict
	gone       int // updates that met NotFound: deleted on the server
	results    map[retry.Result]int
	// endedRetriable counts calls that returned a retriable error
	// (exhausted or cut short), after which no get followed.
	endedRetriable int
	// staleRereads counts gets that returned what the failed write had
	// just been refused for: the version that conflicted, or the object
	// a NotFound update was for. (NotFound after AlreadyExists is no
	// proof: the other writer may have deleted the child in between.)
	staleRereads int
	lastNoopRV   string // the resourceVersion of the latest child found right, nothing written
	unexpected   error
}

// Reconcile makes the child exist, owned by the parent, with the parent's
// value.
func (k *childKeeper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.NamespacedName != k.parent && req.NamespacedName != k.child {
		return reconcile.Result{}, nil
	}
	var parent corev1.ConfigMap
	if err := k.cached.Get(ctx, k.parent, &parent); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	current := &corev1.ConfigMap{}
	switch err := k.cached.Get(ctx, k.child, current); {
	case apierrors.IsNotFound(err):
		current = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.child.Name, Namespace: k.child.Namespace}}
	case err != nil:
		return reconcile.Result{}, err
	}
	k.count(func() {
		k.reconciles++
		if current.ResourceVersion != "" {
			k.fromCache++
		}
	})

	// What the last failed write was refused for, to tell a stale re-read.
	var refusedRV string
	var refusedUID types.UID
	got, result, err := retry.CreateOrUpdate(ctx, generousUpdate, current,
		func(ctx context.Context) (*corev1.ConfigMap, error) {
			var live corev1.ConfigMap
			err := k.live.Get(ctx, k.child, &live)
			k.count(func() {
				k.gets++
				switch {
				case apierrors.IsNotFound(err):
					k.notFound++
				case err == nil && (live.ResourceVersion == refusedRV || live.UID == refusedUID):
					k.staleRereads++
				}
			})
			refusedRV, refusedUID = "", ""
			if err != nil {
				return nil, err
			}
			return &live, nil
		},
		func(cm *corev1.ConfigMap) error {
			k.count(func() { k.attempts++ })
			cm.Data = map[string]string{valueKey: parent.Data[valueKey]}
			return controllerutil.SetControllerReference(&parent, cm, k.scheme)
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			err := k.cached.Create(ctx, cm)
			k.count(func() {
				k.creates++
				if apierrors.IsAlreadyExists(err) {
					k.exists++
				}
			})
			return cm, err
		},
		func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
			rv, uid := cm.ResourceVersion, cm.UID
			err := k.cached.Update(ctx, cm)
			k.count(func() {
				k.updates++
				switch {
				case apierrors.IsConflict(err):
					k.conflicts++
				case apierrors.IsNotFound(err):
					k.gone++
				}
			})
			switch {
			case apierrors.IsConflict(err):
				refusedRV = rv
			case apierrors.IsNotFound(err):
				refusedUID = uid
			}
			return cm, err
		})
	k.count(func() {
		k.results[result]++
		switch {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err):
			k.endedRetriable++
		case err != nil && k.unexpected == nil:
			k.unexpected = err
		case err == nil && result == retry.ResultUnchanged:
			k.lastNoopRV = got.ResourceVersion
		}
	})
	return reconcile.Result{}, err
}

func (k *childKeeper) count(f func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	f()
}

// testCreateOrUpdateControllerRuntime runs a controller-runtime manager
// whose reconciler keeps a child ConfigMap (owner reference set) with
// CreateOrUpdate while another client deletes the child and edits its
// data. It checks that the reconciler converges (the child exists, owned
// by the parent, with the parent's value, and the reconciler has seen
// that version and written nothing), that it met the races (Conflict,
// NotFound or AlreadyExists retried, the child recreated), and, counted in
// the reconciler and at the manager's transport, that no retry re-read
// the cache: one cache read per call, every later attempt an API read,
// and no API read returned what had just been refused.
func testCreateOrUpdateControllerRuntime(t *testing.T, s *testserver.Server) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := createNamespace(t, s, "keeper-")
	parentKey := types.NamespacedName{Namespace: ns, Name: "parent"}
	childKey := types.NamespacedName{Namespace: ns, Name: "child"}
	cms := s.Client.CoreV1().ConfigMaps(ns)
	parent, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: parentKey.Name},
		Data:       map[string]string{valueKey: "0"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// One watch on ConfigMaps: an event on the parent or the child
	// reconciles the parent.
	var wire reqcount.Counter
	var k *childKeeper
	stop := startManager(t, ctx, s, ns, "childkeeper", &wire, func(mgr manager.Manager) reconcile.Reconciler {
		k = &childKeeper{
			parent: parentKey, child: childKey,
			cached: mgr.GetClient(), live: mgr.GetAPIReader(), scheme: mgr.GetScheme(),
			results: map[retry.Result]int{},
		}
		return k
	})
	defer stop()

	// The other writer: deletes the child, tampers with its data, and now
	// and then changes the parent's value, as fast as it can, until the
	// reconciler has retried a few times and recreated the child after a
	// deletion (bounded: a run without either fails below).
	const minRetries, maxRounds = 5, 300
	// The rounds start once the reconciler has created the child: on a
	// loaded machine the manager's cache may sync after a writer that
	// started at once had run all its rounds against no child at all.
	if err := poll.Until(ctx, 10*time.Millisecond, 20*time.Second, func() bool {
		_, err := cms.Get(ctx, childKey.Name, metav1.GetOptions{})
		return err == nil
	}); err != nil {
		t.Fatalf("the reconciler did not create the child: %v", err)
	}
	rounds, deletes, tampers, last := 0, 0, 0, "0"
	for rounds < maxRounds {
		k.mu.Lock()
		enough := k.conflicts+k.gone+k.exists >= minRetries && k.creates-k.exists >= 2
		k.mu.Unlock()
		if enough {
			break
		}
		rounds++
		switch rounds % 4 {
		case 0:
			err := cms.Delete(ctx, childKey.Name, metav1.DeleteOptions{})
			if err == nil {
				deletes++
			} else if !apierrors.IsNotFound(err) {
				t.Fatalf("writer: delete: %v", err)
			}
		case 2:
			last = strconv.Itoa(rounds)
			if err := setValue(ctx, cms, parentKey.Name, last); err != nil {
				t.Fatalf("writer: parent: %v", err)
			}
		default:
			err := setValue(ctx, cms, childKey.Name, "tampered-"+strconv.Itoa(rounds))
			if err == nil {
				tampers++
			} else if !apierrors.IsNotFound(err) {
				t.Fatalf("writer: child: %v", err)
			}
		}
	}

	// Converged: the child has the parent's last value and its owner
	// reference, and the reconciler has found that very version right.
	var final *corev1.ConfigMap
	err = poll.Until(ctx, 10*time.Millisecond, 20*time.Second, func() bool {
		cm, err := cms.Get(ctx, childKey.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		final = cm
		k.mu.Lock()
		defer k.mu.Unlock()
		return cm.Data[valueKey] == last && metav1.IsControlledBy(cm, parent) && k.lastNoopRV == cm.ResourceVersion
	})
	if err != nil {
		t.Fatalf("the reconciler did not converge: %v; last child %v, last no-op at resourceVersion %s", err, final, k.lastNoopRV)
	}
	w := wire.Snapshot()
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("manager: %v", err)
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	t.Logf("other writer: %d rounds, %d deletes, %d tampers of the child; reconciler: %d calls (%d from a cached child), results %v, %d attempts, %d API reads (%d NotFound), %d creates (%d AlreadyExists), %d updates (%d Conflict, %d NotFound), %d calls ended on a retriable error",
		rounds, deletes, tampers, k.reconciles, k.fromCache, k.results, k.attempts, k.gets, k.notFound, k.creates, k.exists, k.updates, k.conflicts, k.gone, k.endedRetriable)
	t.Logf("the manager's requests on the wire: %s", formatCounts(w, "configmaps"))

	if k.unexpected != nil {
		t.Errorf("a reconcile failed with an error CreateOrUpdate does not retry: %v", k.unexpected)
	}
	if k.conflicts+k.gone+k.exists == 0 || k.creates-k.exists < 2 {
		t.Fatalf("%d retriable errors and %d creates in %d rounds: the test proves nothing about the races", k.conflicts+k.gone+k.exists, k.creates-k.exists, rounds)
	}
	// Rule 1: a call from a cached child makes its first attempt on it
	// without a read; every other attempt reads through the API reader.
	if k.attempts != k.fromCache+k.gets {
		t.Errorf("%d attempts in %d calls (%d from a cached child) with %d API reads: some attempt read neither current nor the server", k.attempts, k.reconciles, k.fromCache, k.gets)
	}
	// Each retried error was followed by one API read.
	if retried := k.conflicts + k.gone + k.exists - k.endedRetriable; k.gets != retried+(k.reconciles-k.fromCache) {
		t.Errorf("%d API reads for %d retried errors and %d calls without a cached child, want one each", k.gets, retried, k.reconciles-k.fromCache)
	}
	if k.staleRereads > 0 {
		t.Errorf("%d retries read back what had just been refused", k.staleRereads)
	}
	// The server's view: cache reads never reached it; every API read,
	// create and update did.
	wireGets, wirePosts, wirePuts := w[reqcount.Key{Verb: "get", Resource: "configmaps"}], w[reqcount.Key{Verb: "create", Resource: "configmaps"}], w[reqcount.Key{Verb: "update", Resource: "configmaps"}]
	if wireGets != k.gets || wirePosts != k.creates || wirePuts != k.updates {
		t.Errorf("the wire saw %d GETs, %d POSTs and %d PUTs of ConfigMaps; the reconciler made %d API reads, %d creates and %d updates",
			wireGets, wirePosts, wirePuts, k.gets, k.creates, k.updates)
	}
}

// setValue sets valueKey of the ConfigMap name to v, read-change-write
// retried on Conflict.
func setValue(ctx context.Context, cms interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.ConfigMap, error)
	Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
}, name, v string) error {
	return retry.RetryOnConflictWithContext(ctx, generousUpdate, func(ctx context.Context) error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[valueKey] = v
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}
