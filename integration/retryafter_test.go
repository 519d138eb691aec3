package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// throttled are kube-apiserver flags under which a burst of writes gets
// 429 Too Many Requests with Retry-After: 1 from the max-in-flight filter:
// one mutating and one read request in flight at a time, and no API
// Priority and Fairness, which would queue requests instead. RBAC makes
// the ordinary user that the throttled clients act as need a grant.
var throttled = []string{
	"--enable-priority-and-fairness=false",
	"--max-mutating-requests-inflight=1",
	"--max-requests-inflight=1",
	"--authorization-mode=RBAC",
}

// serverRetryAfter is the delay the max-in-flight filter asks for.
const serverRetryAfter = time.Second

// writerUser is the ordinary user the throttled clients impersonate. The
// server's own loopback credentials are in system:masters, which the
// max-in-flight filter never throttles.
const writerUser = "writer"

// writerClient grants writerUser the right to write ConfigMaps in ns and
// returns a clientset acting as writerUser, with rec, if not nil,
// recording its requests.
func writerClient(t *testing.T, s *testserver.Server, ns string, rec *reqcount.Counter) kubernetes.Interface {
	t.Helper()
	ctx := t.Context()
	_, err := s.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-writer"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""},
			Resources: []string{"configmaps"},
			Verbs:     []string{"get", "list", "create", "update"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create role: %v", err)
	}
	_, err = s.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "configmap-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-writer"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: writerUser}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create role binding: %v", err)
	}
	// RBAC authorizes from an informer cache, which sees the binding a
	// moment after it is stored: wait until the server says yes.
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   writerUser,
		Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "create", Resource: "configmaps",
		},
	}}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := s.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, err
	})
	if err != nil {
		t.Fatalf("waiting for RBAC to let %s create ConfigMaps: %v", writerUser, err)
	}

	cfg := s.Impersonate(writerUser)
	if rec != nil {
		cfg = rec.Config(cfg)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// createConfigMap sends one create with client-go's own retries off
// (MaxRetries(0)), so a 429 comes back to the caller instead of being
// retried inside rest.Request.
func createConfigMap(ctx context.Context, client kubernetes.Interface, ns string, cm *corev1.ConfigMap) error {
	return client.CoreV1().RESTClient().Post().
		Namespace(ns).Resource("configmaps").
		Body(cm).MaxRetries(0).
		Do(ctx).Error()
}

// attempt is one call of the function under retry, timed.
type attempt struct {
	start, end time.Time
	err        error
}

// TestRetryAfter sends 8 concurrent writers x 10 creates, as an ordinary
// user, to an apiserver that admits one mutating request at a time, so
// bursts get 429 with Retry-After: 1. Every create goes through
// OnRetryAfterErrorWithContext with IsRetryAfterError. It checks that all
// writes get through, that the real time between a 429 and the next
// attempt is at least the server's delay and the delay WithOnRetry
// reported, and that the 429s were real: seen on the wire, and at least
// one of them.
func TestRetryAfter(t *testing.T) {
	s := startServer(t, throttled...)
	ns := createNamespace(t, s, "retry-after-")
	// rec keeps the requests that reach the wire, below client-go and
	// this library: their 429s, and the Retry-After values these carried.
	rec := &reqcount.Counter{KeepRequests: true}
	client := writerClient(t, s, ns, rec)

	const writers, writes = 8, 10
	// Jitter spreads the herd that a bare 1s Retry-After would send back
	// at the same moment.
	backoff := retry.Backoff{Steps: 30, Duration: time.Second, Factor: 1, Jitter: 0.5}
	maxStep := time.Duration(float64(backoff.Duration) * (1 + backoff.Jitter))

	type write struct {
		name     string
		err      error
		attempts []attempt
		events   []retry.RetryEvent
	}
	results := make([]write, writers*writes)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// A 64 KiB payload keeps each create in flight a little longer, so
	// the writers' requests overlap and the server has bursts to refuse.
	payload := strings.Repeat("x", 64<<10)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range writes {
				r := &results[w*writes+i]
				r.name = fmt.Sprintf("w%d-%d", w, i)
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: r.name},
					Data:       map[string]string{"payload": payload},
				}
				r.err = retry.OnRetryAfterErrorWithContext(ctx, backoff, retry.IsRetryAfterError,
					func(ctx context.Context) error {
						a := attempt{start: time.Now()}
						a.err = createConfigMap(ctx, client, ns, cm)
						a.end = time.Now()
						r.attempts = append(r.attempts, a)
						return a.err
					},
					retry.WithOnRetry(func(ev retry.RetryEvent) { r.events = append(r.events, ev) }))
			}
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	wall := time.Since(t0)

	var refused, maxAttempts int
	var minGap time.Duration = -1
	for _, r := range results {
		if r.err != nil {
			t.Errorf("%s: %v after %d attempts", r.name, r.err, len(r.attempts))
			continue
		}
		maxAttempts = max(maxAttempts, len(r.attempts))
		if len(r.events) != len(r.attempts)-1 {
			t.Errorf("%s: %d attempts but WithOnRetry called %d times, want %d", r.name, len(r.attempts), len(r.events), len(r.attempts)-1)
			continue
		}
		for k, ev := range r.events {
			a, next := r.attempts[k], r.attempts[k+1]
			refused++
			ra, ok := retry.RetryAfter(a.err)
			switch {
			case !apierrors.IsTooManyRequests(a.err) || !ok:
				t.Errorf("%s attempt %d: retried %v, want a 429 with Retry-After", r.name, k+1, a.err)
			case ra != serverRetryAfter:
				t.Errorf("%s attempt %d: Retry-After %v, want the server's %v", r.name, k+1, ra, serverRetryAfter)
			case ev.Attempt != k+1 || ev.Err != a.err || ev.RetryAfter != ra:
				t.Errorf("%s: WithOnRetry got attempt %d, err %v, RetryAfter %v; want %d, %v, %v", r.name, ev.Attempt, ev.Err, ev.RetryAfter, k+1, a.err, ra)
			case ev.Delay < ra || ev.Delay > maxStep:
				// The wait is max(Step(), Retry-After) and Step() is in
				// [Duration, Duration*(1+Jitter)].
				t.Errorf("%s attempt %d: reported delay %v, want within [%v, %v]", r.name, k+1, ev.Delay, ra, maxStep)
			}
			// Measured, not reported: the real time from the 429 to the
			// next request.
			gap := next.start.Sub(a.end)
			if gap < ev.Delay || gap < serverRetryAfter {
				t.Errorf("%s attempt %d: next attempt %v after the 429, before the reported delay %v or the server's %v", r.name, k+1, gap, ev.Delay, serverRetryAfter)
			}
			if minGap < 0 || gap < minGap {
				minGap = gap
			}
		}
	}

	onWire, retryAfters := 0, map[string]int{}
	for _, r := range rec.Requests() {
		if r.Code == http.StatusTooManyRequests {
			onWire++
			retryAfters[r.RetryAfter]++
		}
	}
	t.Logf("%d writes in %v: %d answered 429 (%d on the wire, Retry-After values %v), at most %d attempts for one write, shortest wait after a 429 %v",
		len(results), wall.Round(time.Millisecond), refused, onWire, retryAfters, maxAttempts, minGap.Round(time.Millisecond))
	if onWire == 0 {
		t.Fatal("the server answered no write with 429: nothing was throttled, so nothing was tested")
	}
	if refused != onWire {
		t.Errorf("the loops retried %d 429s but %d reached the client", refused, onWire)
	}
	if want := fmt.Sprint(int(serverRetryAfter / time.Second)); retryAfters[want] != onWire {
		t.Errorf("Retry-After headers %v, want all %q", retryAfters, want)
	}

	list, err := s.Client.CoreV1().ConfigMaps(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, cm := range list.Items {
		if cm.Data["payload"] == payload {
			written++
		}
	}
	if written != len(results) {
		t.Errorf("%d ConfigMaps stored, want %d", written, len(results))
	}
}

// TestRetryAfterDeadline checks that a reconcile deadline shorter than the
// server's Retry-After ends the loop at once, without sleeping into the
// deadline, with an error that is both DeadlineExceeded and the 429.
//
// It makes the 429 certain: a create whose body is held back keeps the
// server's only mutating slot busy while the loop runs.
func TestRetryAfterDeadline(t *testing.T) {
	s := startServer(t, throttled...)
	ns := createNamespace(t, s, "deadline-")
	client := writerClient(t, s, ns, nil)
	release := holdMutatingSlot(t, s.Impersonate(writerUser), ns, client)
	defer release()

	const deadline = 500 * time.Millisecond // shorter than the server's 1s
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	calls, retries := 0, 0
	t0 := time.Now()
	err := retry.OnRetryAfterErrorWithContext(ctx, retry.DefaultRetryAfterBackoff, retry.IsRetryAfterError,
		func(ctx context.Context) error {
			calls++
			return createConfigMap(ctx, client, ns, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "reconciled"}})
		},
		retry.WithOnRetry(func(retry.RetryEvent) { retries++ }))
	elapsed := time.Since(t0)
	t.Logf("returned after %v: %v", elapsed, err)

	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v is not context.DeadlineExceeded", err)
	}
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("error %v is not the 429", err)
	}
	if ra, ok := retry.RetryAfter(err); !ok || ra != serverRetryAfter {
		t.Errorf("RetryAfter(err) = %v, %v; want %v, true", ra, ok, serverRetryAfter)
	}
	if calls != 1 || retries != 0 {
		t.Errorf("%d attempts and %d waits, want 1 attempt and no wait", calls, retries)
	}
	if elapsed >= deadline {
		t.Errorf("returned after %v: it waited for the %v deadline instead of returning at once", elapsed, deadline)
	}
}

// holdMutatingSlot starts a create whose body it holds back, which keeps the
// request, and with it the server's only mutating in-flight slot, busy
// until the returned release sends the body. It returns once a probe
// create is refused with 429 while the held create is still pending, so
// the slot is known to be taken.
func holdMutatingSlot(t *testing.T, cfg *rest.Config, ns string, client kubernetes.Interface) (release func()) {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	probes := 0
	probe := func() error {
		probes++
		return createConfigMap(t.Context(), client, ns, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", probes)},
		})
	}
	for try := range 10 {
		release, held := holdOnce(t, httpClient, cfg.Host, ns, try, probe)
		if held {
			return release
		}
	}
	t.Fatal("no held create took the mutating slot")
	return nil
}

// holdOnce is one try of holdMutatingSlot.
func holdOnce(t *testing.T, httpClient *http.Client, host, ns string, try int, probe func() error) (release func(), held bool) {
	body, send := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, host+"/api/v1/namespaces/"+ns+"/configmaps", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := httpClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				err = fmt.Errorf("status %s", resp.Status)
			}
		}
		done <- err
	}()
	release = sync.OnceFunc(func() {
		fmt.Fprintf(send, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held-%d"}}`, try)
		send.Close()
		if err := <-done; err != nil {
			t.Errorf("held create: %v", err)
		}
	})

	// Give the held create a head start: a probe that overtook it would
	// have it refused instead.
	time.Sleep(200 * time.Millisecond)
	for range 20 {
		select {
		case err := <-done:
			// Answered without its body: the slot was busy when it came.
			t.Logf("held create %d ended early (%v); trying again", try, err)
			send.Close()
			return nil, false
		default:
		}
		err := probe()
		if apierrors.IsTooManyRequests(err) {
			return release, true
		}
		if err != nil {
			release()
			t.Fatalf("probe create: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	release()
	return nil, false
}
