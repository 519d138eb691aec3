// Package aggregated takes one API group of a kube-apiserver down while
// the rest stays healthy: it registers the group as an aggregated API (an
// APIService) served by a Service with no selector and no endpoints, so
// the aggregator answers 503 for the group's paths, its discovery
// included. The partial-failure tests and the lab's outages command use
// it.
package aggregated

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry/integration/testenv/poll"
)

// API is the aggregated API that TakeDown takes down.
type API struct {
	// Group and Version are the group to take down.
	Group, Version string
	// Namespace and Service name the Service, with no endpoints, that
	// TakeDown creates and registers as the group's server.
	Namespace, Service string
	// Probe is a path of the group that TakeDown GETs until the
	// aggregator answers it with 503, for at most Timeout.
	Probe   string
	Timeout time.Duration
}

// Name is the name of the API's APIService: VERSION.GROUP.
func (a API) Name() string { return a.Version + "." + a.Group }

// Down is an API taken down by TakeDown. Its methods may be called from
// more than one goroutine.
type Down struct {
	API
	// Created is when the APIService was created; Answered how long
	// after it the aggregator first answered Probe with 503, and
	// Answer the error that GET returned.
	Created  time.Time
	Answered time.Duration
	Answer   error

	client kubernetes.Interface
	dyn    dynamic.Interface
}

// apiServices is the resource of the aggregator's registrations.
var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// pollInterval is how often TakeDown and WaitUnavailable ask again.
const pollInterval = 10 * time.Millisecond

// TakeDown creates api's Service, registers api's group and version as
// an APIService served by it, through clients of cfg, and waits until a
// GET of api.Probe answers 503. On an error, including the wait's timeout
// or ctx's end, it deletes what it created.
func TakeDown(ctx context.Context, cfg *rest.Config, api API) (*Down, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	d := &Down{API: api, client: client, dyn: dyn}
	if _, err := client.CoreV1().Services(api.Namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: api.Service},
		// No selector and no Endpoints or EndpointSlice: nothing serves it.
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(443)}}},
	}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create the aggregated API's service: %w", err)
	}
	d.Created = time.Now()
	if _, err := dyn.Resource(apiServices).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": api.Name()},
		"spec": map[string]any{
			"group":                 api.Group,
			"version":               api.Version,
			"groupPriorityMinimum":  int64(1000),
			"versionPriority":       int64(15),
			"insecureSkipTLSVerify": true,
			"service":               map[string]any{"namespace": api.Namespace, "name": api.Service, "port": int64(443)},
		},
	}}, metav1.CreateOptions{}); err != nil {
		cleanup := client.CoreV1().Services(api.Namespace).Delete(context.WithoutCancel(ctx), api.Service, metav1.DeleteOptions{})
		return nil, errors.Join(fmt.Errorf("register the aggregated API: %w", err), cleanup)
	}
	var code int
	if err := poll.Until(ctx, pollInterval, api.Timeout, func() bool {
		code, d.Answer = d.Status(ctx, api.Probe)
		return code == http.StatusServiceUnavailable
	}); err != nil {
		return nil, errors.Join(
			fmt.Errorf("the aggregator did not answer 503 for %s within %v: last %d, %v (%w)", api.Probe, api.Timeout, code, d.Answer, err),
			d.Restore(context.WithoutCancel(ctx)))
	}
	d.Answered = time.Since(d.Created)
	return d, nil
}

// Status returns the status code the server answers a GET of path with,
// and the error the GET returned.
func (d *Down) Status(ctx context.Context, path string) (int, error) {
	var code int
	err := d.client.CoreV1().RESTClient().Get().AbsPath(path).Do(ctx).StatusCode(&code).Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code = int(status.Status().Code)
	}
	return code, err
}

// WaitUnavailable waits, for at most timeout, until the APIService has
// the condition Available False, and returns its reason and message.
func (d *Down) WaitUnavailable(ctx context.Context, timeout time.Duration) (string, error) {
	var reason string
	err := poll.Until(ctx, pollInterval, timeout, func() bool {
		obj, err := d.dyn.Resource(apiServices).Get(ctx, d.Name(), metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Available" && m["status"] == "False" {
				reason = fmt.Sprintf("%v: %v", m["reason"], m["message"])
				return true
			}
		}
		return false
	})
	if err != nil {
		return "", fmt.Errorf("the APIService %s was not marked unavailable within %v: %w", d.Name(), timeout, err)
	}
	return reason, nil
}

// Restore deletes the APIService, which gives the group back to the
// server itself (404 for a group it does not serve), and the Service. It
// tries both and returns both errors.
func (d *Down) Restore(ctx context.Context) error {
	var errs []error
	if err := d.dyn.Resource(apiServices).Delete(ctx, d.Name(), metav1.DeleteOptions{}); err != nil {
		errs = append(errs, fmt.Errorf("delete the APIService %s: %w", d.Name(), err))
	}
	if err := d.client.CoreV1().Services(d.Namespace).Delete(ctx, d.Service, metav1.DeleteOptions{}); err != nil {
		errs = append(errs, fmt.Errorf("delete the service %s/%s: %w", d.Namespace, d.Service, err))
	}
	return errors.Join(errs...)
}
