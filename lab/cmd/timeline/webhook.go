package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kuberetry/retry/integration/testenv/poll"
)

// webhookLabel selects the Secrets the webhook covers.
const webhookLabel = "kuberetry.test/timeline"

// webhook is a validating admission webhook for the CREATE and UPDATE of
// the labelled Secrets of one namespace, served on loopback by this
// process: it allows every request, or, while failing, answers 500, so
// that the apiserver (failurePolicy Fail) answers those writes with 500
// while it serves everything else.
type webhook struct {
	srv     *httptest.Server
	name    string
	failing atomic.Bool
	reviews atomic.Int64 // the requests it was sent
}

// startWebhook serves the webhook, registers it for ns's labelled
// Secrets, and waits until a write of the Secret probe (which it creates)
// reaches it.
func startWebhook(ctx context.Context, client kubernetes.Interface, ns string) (*webhook, error) {
	w := &webhook{name: "timeline-" + ns}
	w.srv = httptest.NewUnstartedServer(http.HandlerFunc(w.serve))
	w.srv.StartTLS()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.srv.Certificate().Raw})
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: w.name},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:         "secrets.timeline.kuberetry.test",
			ClientConfig: admissionregv1.WebhookClientConfig{URL: to(w.srv.URL + "/validate"), CABundle: ca},
			Rules: []admissionregv1.RuleWithOperations{{
				Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
				Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"},
					Scope: to(admissionregv1.NamespacedScope)},
			}},
			FailurePolicy:           to(admissionregv1.Fail),
			SideEffects:             to(admissionregv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          to[int32](5),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{webhookLabel: "yes"}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		w.srv.Close()
		return nil, fmt.Errorf("register the webhook: %w", err)
	}
	secrets := client.CoreV1().Secrets(ns)
	probe, err := secrets.Create(ctx, coveredSecret("webhook-probe"), metav1.CreateOptions{})
	if err != nil {
		return nil, errors.Join(err, w.stop(ctx, client))
	}
	n := 0
	var lastErr error
	if err := poll.Until(ctx, 20*time.Millisecond, time.Minute, func() bool {
		n++
		probe.Data = map[string][]byte{"n": []byte(strconv.Itoa(n))}
		var got *corev1.Secret
		if got, lastErr = secrets.Update(ctx, probe, metav1.UpdateOptions{}); lastErr != nil {
			return false
		}
		probe = got
		return w.reviews.Load() > 0
	}); err != nil {
		return nil, errors.Join(fmt.Errorf("the webhook was never called: %w (last write: %v)", err, lastErr), w.stop(ctx, client))
	}
	return w, nil
}

// coveredSecret is a Secret the webhook covers.
func coveredSecret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{webhookLabel: "yes"}}}
}

// serve answers an AdmissionReview: allowed, or 500 while failing.
func (w *webhook) serve(rw http.ResponseWriter, req *http.Request) {
	w.reviews.Add(1)
	if w.failing.Load() {
		http.Error(rw, "the webhook is failing", http.StatusInternalServerError)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(admissionv1.AdmissionReview{
		TypeMeta: review.TypeMeta,
		Response: &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true},
	})
}

// stop deletes the registration and stops the server.
func (w *webhook) stop(ctx context.Context, client kubernetes.Interface) error {
	defer w.srv.Close()
	return client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, w.name, metav1.DeleteOptions{})
}

// to returns a pointer to v.
func to[T any](v T) *T { return &v }
