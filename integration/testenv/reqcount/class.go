package reqcount

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Class is the kind of failure a request met: a response the server
// refused it with, or the transport error it ended in.
type Class int

// The classes, None first.
const (
	None        Class = iota // no failure of these kinds: a response other than 409, 429 or 5xx
	Conflict                 // 409 Conflict
	ServerError              // 429 or 5xx
	Timeout                  // the client's timeout
	Reset                    // ECONNRESET, or EPIPE: a write after the reset arrived
	Refused                  // ECONNREFUSED
	EOF                      // the connection closed under a request
	HTTP2Lost                // http2: client connection lost
	HTTP2Closed              // net/http failed the HTTP/2 connection under the request
	Other                    // any other error
	numClasses
)

// Classes returns every Class but None, in order.
func Classes() []Class {
	cs := make([]Class, 0, numClasses-1)
	for c := None + 1; c < numClasses; c++ {
		cs = append(cs, c)
	}
	return cs
}

// String returns the name of c, e.g. "429/5xx", or "Class(N)" for a
// number that is no Class.
func (c Class) String() string {
	if c < None || c >= numClasses {
		return fmt.Sprintf("Class(%d)", int(c))
	}
	return [...]string{"none", "conflict", "429/5xx", "timeout", "reset", "refused", "EOF", "http2 lost", "http2 closed", "other"}[c]
}

// codeClass returns the Class of a response with status code.
func codeClass(code int) Class {
	switch {
	case code == http.StatusConflict:
		return Conflict
	case code == http.StatusTooManyRequests || code >= 500:
		return ServerError
	}
	return None
}

// ErrClass returns the Class of err, as a client call or a round trip
// returns it: None for nil, Conflict and ServerError for the API errors
// of those responses, Other for any other API error. A client timeout
// also claims to be context.DeadlineExceeded (net/http's timeoutError),
// so it is told by its Timeout method.
func ErrClass(err error) Class {
	var status apierrors.APIStatus
	var timeout interface{ Timeout() bool }
	switch {
	case err == nil:
		return None
	case apierrors.IsConflict(err):
		return Conflict
	case errors.As(err, &status):
		if c := codeClass(int(status.Status().Code)); c == ServerError {
			return c
		}
		return Other
	case utilnet.IsConnectionRefused(err):
		return Refused
	case utilnet.IsConnectionReset(err), errors.Is(err, syscall.EPIPE):
		return Reset
	case errors.As(err, &timeout) && timeout.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return Timeout
	case utilnet.IsHTTP2ConnectionLost(err):
		return HTTP2Lost
	case strings.Contains(err.Error(), "http2: client conn"),
		strings.Contains(err.Error(), "http2: Transport received Server's graceful shutdown GOAWAY"):
		// Go's HTTP/2 transport closes a connection on a write error and
		// fails every other request on it ("client connection force
		// closed"), and fails a request whose new connection a reset cut
		// short ("client conn could not be established").
		return HTTP2Closed
	case utilnet.IsProbableEOF(err):
		return EOF
	}
	return Other
}
