package apfsim

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/kuberetry/retry/integration/testenv/poll"
)

// MaxResends is how many times client-go's rest.Request sends a request
// again after a retryable answer (its maxRetries).
const MaxResends = 10

// Client makes a process's requests as client-go's rest.Request.Do does,
// over HTTP (the Budget's WrapTransport, or the level itself): each
// request is sent again, up to MaxResends times, after a 429 or 5xx with a
// Retry-After (after that many seconds), and a GET after a reset
// connection or an EOF (after 1s, client-go's artificial Retry-After); the
// last answer becomes the error client-go returns: a 429's an
// apierrors.StatusError of reason TooManyRequests with its
// RetryAfterSeconds, a transport error as http.Client gives it (a
// *url.Error). This is a model of client-go's with_retry.go and
// request.go, not client-go: a typed clientset per process would cost the
// simulation more than the level and the Budget together.
type Client struct {
	HTTP *http.Client
	// Host is the apiserver's base URL, User the user every request is
	// impersonating (its flow).
	Host, User string
}

// Do sends method to path with body (nil for none) and returns nil for a
// 2xx answer.
func (c *Client) Do(ctx context.Context, method, path string, body []byte) error {
	var wait time.Duration
	for attempts := 0; ; {
		if attempts > 0 {
			if err := sleep(ctx, wait); err != nil {
				return err
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, c.Host+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		if body == nil {
			req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
		}
		req.Header.Set("Impersonate-User", c.User)
		resp, err := c.HTTP.Do(req)
		attempts++
		if err != nil {
			if attempts <= MaxResends && method == http.MethodGet && ctx.Err() == nil &&
				(utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)) {
				wait = time.Second
				continue
			}
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		code := resp.StatusCode
		if code >= 200 && code < 300 {
			return nil
		}
		seconds, hasWait := retryAfter(resp)
		if attempts <= MaxResends && hasWait && (code == http.StatusTooManyRequests || code >= 500) {
			wait = time.Duration(seconds) * time.Second
			continue
		}
		return apierrors.NewGenericServerResponse(code, method, schema.GroupResource{Resource: "configmaps"}, "", "", max(seconds, 0), true)
	}
}

func retryAfter(resp *http.Response) (int, bool) {
	if h := resp.Header.Get("Retry-After"); h != "" {
		if i, err := strconv.Atoi(h); err == nil {
			return i, true
		}
	}
	return 0, false
}

// sleep waits d, or until ctx ends, and returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	poll.Sleep(ctx, d)
	return ctx.Err()
}
