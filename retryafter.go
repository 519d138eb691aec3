package retry

import (
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ParseRetryAfter parses the value of a Retry-After header (RFC 9110,
// section 10.2.3), after trimming spaces and tabs, and reports whether it is
// valid. A delay-seconds value is ASCII digits only ("007" is 7s); a sign,
// a decimal point, an exponent, a unit or an empty value is invalid, as is a
// number of seconds that does not fit a time.Duration. (client-go's
// strconv.Atoi also takes "+5" and "-1"; this does not.) An HTTP-date, in any
// form net/http.ParseTime accepts, gives the time from now until the date, or
// 0 when the date is not after now; a date further away than the largest
// time.Duration is invalid. now is used only for an HTTP-date.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = trimSpaceTab(value)
	if value == "" {
		return 0, false
	}
	if secs, isNumber, ok := parseSeconds(value); isNumber {
		return secs, ok
	}
	date, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	d := date.Sub(now)
	switch {
	case d <= 0:
		return 0, true
	case d == maxDuration && !now.Add(d).Equal(date): // Sub saturated
		return 0, false
	}
	return d, true
}

// trimSpaceTab is strings.Trim(s, " \t") without building a cutset on
// every call.
func trimSpaceTab(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseSeconds parses s as delay-seconds. isNumber reports whether s is
// digits only; ok reports whether the number of seconds fits a Duration.
func parseSeconds(s string) (d time.Duration, isNumber, ok bool) {
	const maxSeconds = int64(maxDuration / time.Second)
	var n int64
	fits := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false, false
		}
		if fits {
			n = n*10 + int64(c-'0')
			fits = n <= maxSeconds
		}
	}
	if !fits {
		return 0, true, false
	}
	return time.Duration(n) * time.Second, true, true
}

// ResponseRetryAfter returns the delay that resp asks for, as client-go's
// rest package reads it: only a 429 Too Many Requests or a status of 500 or
// above counts, and then the first Retry-After header, parsed by
// [ParseRetryAfter] (so an HTTP-date counts too). A nil resp gives false.
func ResponseRetryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil || !retryAfterStatus(resp.StatusCode) {
		return 0, false
	}
	return ParseRetryAfter(resp.Header.Get("Retry-After"), now)
}

// RetryAfter returns the delay a Kubernetes API error suggests, as
// apierrors.SuggestsClientDelay finds it (through wrapping too), in whole
// seconds; a negative value counts as 0. It returns (0, false) for nil and
// for an error that suggests no delay. client-go keeps a server's
// Retry-After in an API error as whole seconds, so an HTTP-date never
// reaches it.
func RetryAfter(err error) (time.Duration, bool) {
	if err == nil {
		return 0, false
	}
	secs, ok := apierrors.SuggestsClientDelay(err)
	if !ok {
		return 0, false
	}
	return time.Duration(max(secs, 0)) * time.Second, true
}

// IsRetryAfterError reports whether err is a Kubernetes API error (found
// through wrapping) with status 429 or 500 and above that suggests a delay
// ([RetryAfter] is ok): the errors a server asks the client to retry later.
// It is the usual predicate for [OnRetryAfterError].
func IsRetryAfterError(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !retryAfterStatus(int(status.Status().Code)) {
		return false
	}
	_, ok := RetryAfter(err)
	return ok
}

func retryAfterStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
}
