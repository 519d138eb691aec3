package integration_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/poll"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
	"github.com/kuberetry/retry/integration/testenv/testserver"
)

// webhookLabel selects the Secrets that the unreachable webhook covers.
const webhookLabel = "kuberetry.test/webhook"

// TestPartialFailureWebhook is issue 27's admission webhook that cannot be
// reached: a ValidatingWebhookConfiguration for CREATE and UPDATE of the
// test's labelled Secrets, failurePolicy Fail, timeoutSeconds 1, whose URL
// is a closed local port, so the apiserver answers 500 to a write of those
// Secrets while it answers 200 to their reads and serves everything else.
// The harness of TestPartialFailureAggregatedAPI runs with 4 failing
// workers that update their own Secret with Update, each call inside
// OnErrorValue(IsTransient): two from the object they stored (a PUT
// alone), two from a built object (a GET that succeeds, then a PUT that
// fails). At the end of the busy phase the webhook configuration is
// deleted. The failing backend's requests are the writes of the Secrets;
// the reads are reported beside them.
func TestPartialFailureWebhook(t *testing.T) {
	s := startServer(t)
	ns := createNamespace(t, s, "partial-webhook-")
	phases := []pfPhase{
		{name: "quiet", pause: time.Second, length: 5 * time.Second},
		{name: "busy", pause: 50 * time.Millisecond, length: 5 * time.Second},
	}
	workers := []string{"stored-0", "stored-1", "built-0", "built-1"}
	// Every failing worker's Secret, and one to check the webhook with,
	// created before the webhook, which refuses their creates too.
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{webhookLabel: "fail"}}}
	}
	names := []string{"check"}
	for _, ph := range phases {
		for _, id := range []string{"p0", "p1"} {
			for _, w := range workers {
				names = append(names, fmt.Sprintf("%s-%s-%s", ph.name, id, w))
			}
		}
	}
	for _, name := range names {
		if _, err := s.Client.CoreV1().Secrets(ns).Create(t.Context(), secret(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startWebhookDown(t, s, ns)

	setup := &pfSetup{
		s:  s,
		ns: ns,
		classify: func(req *http.Request) pfClass {
			switch p := req.URL.Path; {
			case strings.HasPrefix(p, "/api/v1/namespaces/"+ns+"/secrets/"):
				return pfFailing
			case strings.HasPrefix(p, "/api/v1/namespaces/"+ns+"/configmaps/"):
				return pfHealthy
			}
			return pfOther
		},
		failingOf: func(f *pfFigures) int {
			return total(f.wire[pfFailing]) - f.wire[pfFailing][reqcount.Key{Verb: "get", Resource: "secrets"}]
		},
	}
	for _, w := range workers {
		setup.failing = append(setup.failing, pfWorker{name: w, class: pfFailing,
			recovered: func(err error) bool { return err == nil },
			newCall: func(t *testing.T, p *pfProcess, ph pfPhase) func(context.Context) error {
				name := fmt.Sprintf("%s-%s-%s", ph.name, p.id, w)
				obj := secret(name)
				stored := strings.HasPrefix(w, "stored")
				if stored {
					var err error
					if obj, err = s.Client.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				secrets := p.client.CoreV1().Secrets(ns)
				n := 0
				return func(ctx context.Context) error {
					n++
					got, err := retry.Update(ctx, retry.DefaultRetry, secrets, obj, func(s *corev1.Secret) error {
						s.Data = map[string][]byte{"n": []byte(strconv.Itoa(n))}
						return nil
					})
					if err == nil && stored {
						obj = got
					}
					return err
				}
			}})
	}
	phases[1].fix = func(ctx context.Context) error { return stopWebhook(t, ctx, s, ns) }

	for _, ph := range phases {
		t.Run(ph.name, func(t *testing.T) {
			none, ours := runPartial(t, setup, ph)
			for _, f := range []*pfFigures{none, ours} {
				o := f.outcomes[pfFailing]
				if n := o.Count(func(o reqcount.Outcome) bool { return o.Verb != "get" && o.Code != 500 }); n > 0 {
					t.Errorf("%s: %d writes of the failing Secrets answered other than 500 during the phase: %s", f.name, n, o)
				}
				if n := o.Count(func(o reqcount.Outcome) bool { return o.Verb == "get" && o.Code != 200 }); n > 0 {
					t.Errorf("%s: %d reads of the failing Secrets answered other than 200 during the phase: %s", f.name, n, o)
				}
				if f.name == none.name && o.Status("get", "secrets", 200) == 0 {
					t.Errorf("%s: the workers from a built object read no Secret: %s", f.name, o)
				}
			}
			checkPartial(t, setup, ph, none, ours)
		})
	}
}

// closedPort returns a local TCP port that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// webhookName is the name of ns's ValidatingWebhookConfiguration.
func webhookName(ns string) string { return "deny-secrets-" + ns }

// startWebhookDown registers the webhook that cannot be reached and waits
// until the apiserver answers 500 to a PUT of the Secret "check"; it
// checks on the wire that the GET of that Secret answers 200 meanwhile,
// and reports the server's answer.
func startWebhookDown(t *testing.T, s *testserver.Server, ns string) {
	t.Helper()
	ctx := t.Context()
	port := closedPort(t)
	created := time.Now()
	if _, err := s.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookName(ns)},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:         "secrets.kuberetry.test",
			ClientConfig: admissionv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/validate", port))},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"},
					Scope: ptr.To(admissionv1.NamespacedScope)},
			}},
			FailurePolicy:           ptr.To(admissionv1.Fail),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](1),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{webhookLabel: "fail"}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	wire := &reqcount.Counter{KeepRequests: true}
	client, err := kubernetes.NewForConfig(wire.Config(s.Config))
	if err != nil {
		t.Fatal(err)
	}
	secrets := client.CoreV1().Secrets(ns)
	n := 0
	var putErr error
	if err := poll.Until(ctx, 10*time.Millisecond, 20*time.Second, func() bool {
		n++
		check, err := secrets.Get(ctx, "check", metav1.GetOptions{})
		if err != nil {
			putErr = err
			return false
		}
		check.Data = map[string][]byte{"n": []byte(strconv.Itoa(n))}
		_, putErr = secrets.Update(ctx, check, metav1.UpdateOptions{})
		return putErr != nil
	}); err != nil {
		t.Fatalf("the webhook never refused a write of a Secret: last %v", putErr)
	}
	took := time.Since(created)
	reqs := sequence(wire)
	last := reqs[len(reqs)-2:]
	t.Logf("the webhook refused the PUT of a Secret %v after it was registered; the last GET and PUT of it on the wire: %v; the error: %v",
		took.Round(time.Millisecond), last, putErr)
	if want := []string{"get secrets 200", "update secrets 500"}; last[0] != want[0] || last[1] != want[1] {
		t.Fatalf("the GET and PUT of one Secret answered %v, want %v", last, want)
	}
	if !retry.IsTransient(putErr) {
		t.Fatalf("the webhook's refusal %v is not transient", putErr)
	}
}

// stopWebhook deletes the webhook configuration and reports when the
// apiserver itself takes a write of the Secret "check" again.
func stopWebhook(t *testing.T, ctx context.Context, s *testserver.Server, ns string) error {
	deleted := time.Now()
	if err := s.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, webhookName(ns), metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete the webhook: %w", err)
	}
	secrets := s.Client.CoreV1().Secrets(ns)
	n := 0
	var last error
	if err := poll.Until(ctx, 5*time.Millisecond, 10*time.Second, func() bool {
		n++
		_, last = retry.Update(ctx, retry.DefaultRetry, secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "check", Namespace: ns}},
			func(s *corev1.Secret) error {
				s.Data = map[string][]byte{"fixed": []byte(strconv.Itoa(n))}
				return nil
			})
		return last == nil
	}); err != nil {
		return fmt.Errorf("a write of a Secret still failed 10s after the webhook was deleted: %v", last)
	}
	t.Logf("the webhook deleted: the server took a write of a Secret after %v", time.Since(deleted).Round(time.Millisecond))
	return nil
}
