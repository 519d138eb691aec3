package integration_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"

	"github.com/kuberetry/retry/integration/internal/reqcount"
)

// statusKey is a request's verb and resource, as reqcount classifies it,
// and the status code of its response (0 when none came back).
type statusKey struct {
	reqcount.Key
	Code int
}

// statusCounter counts the responses that pass through the transports it
// wraps, by verb, resource and status code: the 409s and 404s a loop met,
// as the server sent them.
type statusCounter struct {
	mu sync.Mutex
	n  map[statusKey]int
}

// Config returns a copy of cfg whose clients send every request through c.
func (c *statusCounter) Config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			k := statusKey{Key: reqcount.Classify(req)}
			if err == nil {
				k.Code = resp.StatusCode
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.n == nil {
				c.n = map[statusKey]int{}
			}
			c.n[k]++
			return resp, err
		})
	})
	return cfg
}

// count returns the responses to verb on resource with status code, or
// with any code when code is -1.
func (c *statusCounter) count(verb, resource string, code int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.n {
		if k.Verb == verb && k.Resource == resource && (code == -1 || k.Code == code) {
			n += v
		}
	}
	return n
}

// of returns the responses to resource as "verb code" -> count, every
// verb and code.
func (c *statusCounter) of(resource string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		if k.Resource == resource {
			out[fmt.Sprintf("%s %d", k.Verb, k.Code)] += v
		}
	}
	return out
}

// String lists the counts of resource, e.g. "create 201: 1, create 409: 15".
func (c *statusCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for k, v := range c.n {
		parts = append(parts, fmt.Sprintf("%s %s %d: %d", k.Verb, k.Resource, k.Code, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
