package retry_test

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// raNow is the fixed "now" of the Retry-After tests; dates are built
// relative to it.
var raNow = time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)

// maxRetryAfterSeconds is the largest delay-seconds whose Duration fits.
const maxRetryAfterSeconds = int64(math.MaxInt64 / int64(time.Second))

var raResource = schema.GroupResource{Group: "apps", Resource: "deployments"}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	imf := func(d time.Duration) string { return raNow.Add(d).Format(http.TimeFormat) }
	rfc850 := func(d time.Duration) string { return raNow.Add(d).UTC().Format("Monday, 02-Jan-06 15:04:05 GMT") }
	asctime := func(d time.Duration) string { return raNow.Add(d).UTC().Format(time.ANSIC) }
	largest := time.Duration(maxRetryAfterSeconds) * time.Second
	tests := []struct {
		name   string
		value  string
		now    time.Time // raNow when zero
		want   time.Duration
		wantOK bool
		// date marks a value that net/http.ParseTime must accept, so the
		// case really exercises the HTTP-date path.
		date bool
	}{
		{name: "zero", value: "0", want: 0, wantOK: true},
		{name: "seconds", value: "5", want: 5 * time.Second, wantOK: true},
		{name: "leading zeros", value: "007", want: 7 * time.Second, wantOK: true},
		{name: "many leading zeros", value: strings.Repeat("0", 1000) + "1", want: time.Second, wantOK: true},
		{name: "minutes of seconds", value: "120", want: 2 * time.Minute, wantOK: true},
		{name: "leading space", value: " 5", want: 5 * time.Second, wantOK: true},
		{name: "trailing space", value: "5 ", want: 5 * time.Second, wantOK: true},
		{name: "tabs", value: "\t5\t", want: 5 * time.Second, wantOK: true},
		{name: "spaces and tabs", value: " \t 42 \t", want: 42 * time.Second, wantOK: true},
		{name: "largest fitting seconds", value: strconv.FormatInt(maxRetryAfterSeconds, 10), want: largest, wantOK: true},
		{name: "largest fitting seconds with a leading zero", value: "0" + strconv.FormatInt(maxRetryAfterSeconds, 10), want: largest, wantOK: true},
		{name: "one second too many", value: strconv.FormatInt(maxRetryAfterSeconds+1, 10)},
		{name: "twenty nines", value: "99999999999999999999"},
		{name: "2^64", value: "18446744073709551616"},
		{name: "plus sign", value: "+5"},
		{name: "minus one", value: "-1"},
		{name: "minus zero", value: "-0"},
		{name: "decimal", value: "1.5"},
		{name: "exponent", value: "1e9"},
		{name: "unit", value: "5s"},
		{name: "hex", value: "0x10"},
		{name: "empty", value: ""},
		{name: "only spaces", value: "   "},
		{name: "only a tab", value: "\t"},
		{name: "two numbers", value: "1 2"},
		{name: "newline is not trimmed", value: "\n5"},
		{name: "carriage return is not trimmed", value: "5\r"},
		{name: "arabic-indic digit", value: "\u0661"},
		{name: "fullwidth digit", value: "\uff15"},
		{name: "word", value: "soon"},
		{name: "NaN", value: "NaN"},
		{name: "Infinity", value: "Infinity"},

		{name: "IMF-fixdate in the future", value: imf(90 * time.Second), want: 90 * time.Second, wantOK: true, date: true},
		{name: "RFC 850 date in the future", value: rfc850(time.Hour), want: time.Hour, wantOK: true, date: true},
		{name: "asctime date in the future", value: asctime(24 * time.Hour), want: 24 * time.Hour, wantOK: true, date: true},
		{name: "IMF-fixdate one second ahead", value: imf(time.Second), want: time.Second, wantOK: true, date: true},
		{name: "IMF-fixdate equal to now", value: imf(0), want: 0, wantOK: true, date: true},
		{name: "IMF-fixdate in the past", value: imf(-time.Hour), want: 0, wantOK: true, date: true},
		{name: "RFC 850 date in the past", value: rfc850(-time.Minute), want: 0, wantOK: true, date: true},
		{name: "asctime date in the past", value: asctime(-48 * time.Hour), want: 0, wantOK: true, date: true},
		{name: "year 1", value: "Mon, 01 Jan 0001 00:00:00 GMT", want: 0, wantOK: true, date: true},
		{name: "date with spaces and tabs around", value: " \t" + imf(time.Minute) + "\t ", want: time.Minute, wantOK: true, date: true},
		{
			name: "date with a fractional now", value: imf(10 * time.Second), now: raNow.Add(250 * time.Millisecond),
			want: 9750 * time.Millisecond, wantOK: true, date: true,
		},
		{name: "largest fitting date", value: imf(largest), want: largest, wantOK: true, date: true},
		{name: "one second past the largest fitting date", value: raNow.Add(largest).Add(time.Second).Format(http.TimeFormat), date: true},
		{name: "IMF-fixdate in year 9999", value: "Fri, 31 Dec 9999 23:59:59 GMT", date: true},
		{name: "asctime date in year 9999", value: "Fri Dec 31 23:59:59 9999", date: true},
		{name: "date in UTC instead of GMT", value: strings.Replace(imf(time.Minute), "GMT", "UTC", 1)},
		{name: "day 32", value: "Sat, 32 Mar 2026 15:09:26 GMT"},
		{name: "date without a time", value: "Sat, 14 Mar 2026"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := tt.now
			if now.IsZero() {
				now = raNow
			}
			if tt.date {
				_, err := http.ParseTime(strings.Trim(tt.value, " \t"))
				require.NoError(t, err, "the case must be an HTTP-date")
			}
			got, ok := retry.ParseRetryAfter(tt.value, now)
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

// TestParseRetryAfterUsesNowOnlyForDates: delay-seconds do not depend on now.
func TestParseRetryAfterUsesNowOnlyForDates(t *testing.T) {
	t.Parallel()
	for _, now := range []time.Time{{}, raNow, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)} {
		t.Run(now.String(), func(t *testing.T) {
			t.Parallel()
			got, ok := retry.ParseRetryAfter("30", now)
			require.True(t, ok)
			assert.Equal(t, 30*time.Second, got)
		})
	}
}

func TestResponseRetryAfter(t *testing.T) {
	t.Parallel()
	resp := func(code int, values ...string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		for _, v := range values {
			r.Header.Add("Retry-After", v)
		}
		return r
	}
	many := make([]string, 1000)
	for i := range many {
		many[i] = strconv.Itoa(i + 7)
	}
	tests := []struct {
		name   string
		resp   *http.Response
		want   time.Duration
		wantOK bool
	}{
		{"nil response", nil, 0, false},
		{"429", resp(http.StatusTooManyRequests, "5"), 5 * time.Second, true},
		{"500", resp(http.StatusInternalServerError, "5"), 5 * time.Second, true},
		{"503", resp(http.StatusServiceUnavailable, "120"), 2 * time.Minute, true},
		{"504 with an HTTP-date", resp(http.StatusGatewayTimeout, raNow.Add(30*time.Second).Format(http.TimeFormat)), 30 * time.Second, true},
		{"599", resp(599, "1"), time.Second, true},
		{"503 with zero", resp(http.StatusServiceUnavailable, "0"), 0, true},
		{"200", resp(http.StatusOK, "5"), 0, false},
		{"301", resp(http.StatusMovedPermanently, "5"), 0, false},
		{"404", resp(http.StatusNotFound, "5"), 0, false},
		{"409", resp(http.StatusConflict, "5"), 0, false},
		{"499", resp(499, "5"), 0, false},
		{"429 without the header", resp(http.StatusTooManyRequests), 0, false},
		{"503 with a nil Header", &http.Response{StatusCode: http.StatusServiceUnavailable}, 0, false},
		{"503 with an empty header", resp(http.StatusServiceUnavailable, ""), 0, false},
		{"two headers: the first counts", resp(http.StatusServiceUnavailable, "5", "10"), 5 * time.Second, true},
		{"an invalid first header is not skipped", resp(http.StatusServiceUnavailable, "soon", "5"), 0, false},
		{"an empty first header is not skipped", resp(http.StatusServiceUnavailable, "", "5"), 0, false},
		{"1000 headers", resp(http.StatusTooManyRequests, many...), 7 * time.Second, true},
		{"minus one", resp(http.StatusServiceUnavailable, "-1"), 0, false},
		{"twenty nines", resp(http.StatusServiceUnavailable, "99999999999999999999"), 0, false},
		{"exponent", resp(http.StatusServiceUnavailable, "1e9"), 0, false},
		{"year 9999", resp(http.StatusServiceUnavailable, "Fri, 31 Dec 9999 23:59:59 GMT"), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := retry.ResponseRetryAfter(tt.resp, raNow)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// statusErr builds an API error with any code, reason and Retry-After, as a
// server might send it.
func statusErr(code int32, reason metav1.StatusReason, retryAfter int32) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    code,
		Reason:  reason,
		Details: &metav1.StatusDetails{RetryAfterSeconds: retryAfter},
	}}
}

// TestRetryAfter compares RetryAfter with apierrors.SuggestsClientDelay, the
// oracle, for every case; wantOK documents what each case is there for.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tooMany := apierrors.NewTooManyRequests("slow down", 5)
	tests := []struct {
		name   string
		err    error
		wantOK bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("boom"), false},
		{"429 with 5s", tooMany, true},
		{"429 with 0s suggests nothing", apierrors.NewTooManyRequests("slow down", 0), false},
		{"429 with negative seconds suggests nothing", apierrors.NewTooManyRequests("slow down", -5), false},
		{"429 with the largest int32", apierrors.NewTooManyRequests("slow down", math.MaxInt32), true},
		{"server timeout with 0s", apierrors.NewServerTimeout(raResource, "get", 0), true},
		{"server timeout with 3s", apierrors.NewServerTimeout(raResource, "get", 3), true},
		{"server timeout with negative seconds", apierrors.NewServerTimeout(raResource, "get", -5), true},
		{"server timeout with the smallest int32", apierrors.NewServerTimeout(raResource, "get", math.MinInt32), true},
		{"timeout 504 with 7s", apierrors.NewTimeoutError("slow", 7), true},
		{"503 from a generic response with 2s", apierrors.NewGenericServerResponse(503, "get", raResource, "x", "", 2, true), true},
		{"generate-name conflict with 1s", apierrors.NewGenerateNameConflict(raResource, "x", 1), true},
		{"conflict", apierrors.NewConflict(raResource, "x", errors.New("stale")), false},
		{"internal error", apierrors.NewInternalError(errors.New("boom")), false},
		{"service unavailable without details", apierrors.NewServiceUnavailable("down"), false},
		{"wrapped 429", fmt.Errorf("update: %w", tooMany), true},
		{"doubly wrapped 429", fmt.Errorf("reconcile: %w", fmt.Errorf("update: %w", tooMany)), true},
		{"joined 429", errors.Join(errors.New("first"), tooMany), true},
		{"wrapped server timeout with 0s", fmt.Errorf("get: %w", apierrors.NewServerTimeout(raResource, "get", 0)), true},
		{"wrapped conflict", fmt.Errorf("update: %w", apierrors.NewConflict(raResource, "x", errors.New("stale"))), false},
		{"hand-made 400 with 9s", statusErr(http.StatusBadRequest, metav1.StatusReasonBadRequest, 9), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := retry.RetryAfter(tt.err)
			require.Equal(t, tt.wantOK, ok)

			var oracleSecs int
			var oracleOK bool
			if tt.err != nil { // SuggestsClientDelay does not take nil
				oracleSecs, oracleOK = apierrors.SuggestsClientDelay(tt.err)
			}
			assert.Equal(t, oracleOK, ok, "ok differs from SuggestsClientDelay")
			if oracleOK {
				assert.Equal(t, time.Duration(max(oracleSecs, 0))*time.Second, got)
			} else {
				assert.Zero(t, got)
			}
			assert.GreaterOrEqual(t, got, time.Duration(0))
		})
	}
}

func TestIsRetryAfterError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("boom"), false},
		{"429 with a delay", apierrors.NewTooManyRequests("slow down", 5), true},
		{"429 without a delay", apierrors.NewTooManyRequests("slow down", 0), false},
		{"429 with negative seconds", apierrors.NewTooManyRequests("slow down", -1), false},
		{"500 server timeout with 0s", apierrors.NewServerTimeout(raResource, "get", 0), true},
		{"500 server timeout with negative seconds", apierrors.NewServerTimeout(raResource, "get", -5), true},
		{"504 timeout with a delay", apierrors.NewTimeoutError("slow", 3), true},
		{"503 with a delay", apierrors.NewGenericServerResponse(503, "get", raResource, "x", "", 2, true), true},
		{"599 with a delay", statusErr(599, metav1.StatusReasonUnknown, 1), true},
		{"500 internal error without a delay", apierrors.NewInternalError(errors.New("boom")), false},
		{"503 without details", apierrors.NewServiceUnavailable("down"), false},
		{"409 conflict", apierrors.NewConflict(raResource, "x", errors.New("stale")), false},
		{"409 with a delay", apierrors.NewGenerateNameConflict(raResource, "x", 1), false},
		{"400 with a delay", statusErr(http.StatusBadRequest, metav1.StatusReasonBadRequest, 9), false},
		{"499 with a delay", statusErr(499, metav1.StatusReasonUnknown, 9), false},
		{"code 0 with a delay", statusErr(0, metav1.StatusReasonUnknown, 9), false},
		{"wrapped 429", fmt.Errorf("update: %w", apierrors.NewTooManyRequests("slow down", 5)), true},
		{"wrapped server timeout", fmt.Errorf("get: %w", apierrors.NewServerTimeout(raResource, "get", 0)), true},
		{"wrapped conflict", fmt.Errorf("update: %w", apierrors.NewConflict(raResource, "x", errors.New("stale"))), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, retry.IsRetryAfterError(tt.err))
		})
	}
}

// TestOnRetryAfterErrorHostileRetryAfterSeconds runs hostile server delays
// through the loop with a recording sleeper: a huge delay is slept as asked
// (or bounded by WithMaxDelay), a negative one never makes a negative wait.
func TestOnRetryAfterErrorHostileRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	backoff := retry.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 2}
	tests := []struct {
		name      string
		err       error
		opts      []retry.Option
		wantWaits []time.Duration
		wantErr   bool // the error is not retried and comes back
	}{
		{"largest int32 seconds", apierrors.NewTooManyRequests("x", math.MaxInt32), nil, []time.Duration{math.MaxInt32 * time.Second}, false},
		{"largest int32 seconds bounded", apierrors.NewTooManyRequests("x", math.MaxInt32), []retry.Option{retry.WithMaxDelay(time.Second)}, []time.Duration{time.Second}, false},
		{"negative server timeout", apierrors.NewServerTimeout(raResource, "get", -5), nil, []time.Duration{10 * time.Millisecond}, false},
		{"smallest int32 server timeout", apierrors.NewServerTimeout(raResource, "get", math.MinInt32), nil, []time.Duration{10 * time.Millisecond}, false},
		{"negative 429 is not a retry-after error", apierrors.NewTooManyRequests("x", -5), nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sleeper fakeSleeper
			calls := 0
			err := retry.OnRetryAfterError(backoff, retry.IsRetryAfterError, func() error {
				calls++
				if calls == 1 {
					return tt.err
				}
				return nil
			}, append(tt.opts, retry.WithSleeper(&sleeper))...)
			if tt.wantErr {
				assert.Same(t, tt.err, err)
				assert.Equal(t, 1, calls)
			} else {
				assert.NoError(t, err)
				assert.Equal(t, 2, calls)
			}
			assert.Equal(t, tt.wantWaits, sleeper.waits)
		})
	}
}

// FuzzParseRetryAfter checks ParseRetryAfter against a model built from the
// contract, strconv and net/http.ParseTime, for any value and any now
// between the years 1 and 9999.
func FuzzParseRetryAfter(f *testing.F) {
	now := raNow.Unix()
	for _, v := range []string{
		"0", "5", "007", " 5\t", "9223372036", "9223372037", "99999999999999999999",
		"18446744073709551616", "+5", "-1", "-0", "1.5", "1e9", "5s", "0x10", "", " ", "\t", "1 2",
		"\u0661", "\uff15", "\n5", "NaN",
		raNow.Add(90 * time.Second).Format(http.TimeFormat),
		raNow.Add(-time.Hour).Format(http.TimeFormat),
		raNow.Add(time.Hour).Format("Monday, 02-Jan-06 15:04:05 GMT"),
		raNow.Add(24 * time.Hour).Format(time.ANSIC),
		"Fri, 31 Dec 9999 23:59:59 GMT",
		"Fri Dec 31 23:59:59 9999",
		"Mon, 01 Jan 0001 00:00:00 GMT",
		"Sunday, 06-Nov-94 08:49:37 PST",
		"Sun Nov  6 08:49:37 1994",
	} {
		f.Add(v, now, uint32(0))
	}
	f.Add("Sat, 14 Mar 2026 15:09:36 GMT", now, uint32(999_999_999))
	f.Add(raNow.Add(time.Duration(maxRetryAfterSeconds)*time.Second).Format(http.TimeFormat), now, uint32(0))
	f.Add(raNow.Add(time.Duration(maxRetryAfterSeconds)*time.Second).Format(http.TimeFormat), now, uint32(854_775_807))
	f.Add(raNow.Add(time.Duration(maxRetryAfterSeconds)*time.Second).Format(http.TimeFormat), now-1, uint32(0))
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", int64(-62135596800), uint32(0))
	f.Add("Mon, 01 Jan 0001 00:00:00 GMT", int64(253402300799), uint32(999_999_999))

	const (
		minSec = -62135596800 // 0001-01-01T00:00:00Z
		maxSec = 253402300799 // 9999-12-31T23:59:59Z
	)
	maxNanos := big.NewInt(math.MaxInt64)
	f.Fuzz(func(t *testing.T, value string, nowSec int64, nowNsec uint32) {
		span := int64(maxSec - minSec + 1)
		sec := minSec + ((nowSec%span)+span)%span
		now := time.Unix(sec, int64(nowNsec%1e9)).UTC()

		got, ok := retry.ParseRetryAfter(value, now)
		if ok {
			require.GreaterOrEqual(t, got, time.Duration(0))
		}

		trimmed := strings.Trim(value, " \t")
		if trimmed != "" && strings.Trim(trimmed, "0123456789") == "" {
			// Digits only: the number round-trips if its Duration fits.
			n, err := strconv.ParseUint(trimmed, 10, 64)
			if err == nil && n <= uint64(maxRetryAfterSeconds) {
				require.True(t, ok, "%q", value)
				require.Equal(t, time.Duration(n)*time.Second, got, "%q", value)
			} else {
				require.False(t, ok, "%q does not fit", value)
			}
			return
		}

		date, err := http.ParseTime(trimmed)
		if err != nil {
			require.False(t, ok, "%q is neither delay-seconds nor an HTTP-date", value)
			return
		}
		// The exact distance, in nanoseconds, without overflow.
		diff := new(big.Int).Mul(big.NewInt(date.Unix()-now.Unix()), big.NewInt(int64(time.Second)))
		diff.Add(diff, big.NewInt(int64(date.Nanosecond())-int64(now.Nanosecond())))
		switch {
		case diff.Sign() <= 0:
			require.True(t, ok, "%q at %v", value, now)
			require.Zero(t, got, "%q at %v", value, now)
		case diff.Cmp(maxNanos) <= 0:
			require.True(t, ok, "%q at %v", value, now)
			require.Equal(t, time.Duration(diff.Int64()), got, "%q at %v", value, now)
		default:
			require.False(t, ok, "%q at %v is farther than the largest Duration", value, now)
		}
		if _, rawErr := http.ParseTime(value); rawErr == nil && diff.Cmp(maxNanos) <= 0 {
			require.True(t, ok, "net/http accepts %q as it is", value)
		}
	})
}

var (
	retryAfterSink   time.Duration
	retryAfterOKSink bool
)

func BenchmarkParseRetryAfterSeconds(b *testing.B) {
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		retryAfterSink, retryAfterOKSink = retry.ParseRetryAfter("120", raNow)
	}
}

func BenchmarkParseRetryAfterHTTPDate(b *testing.B) {
	value := raNow.Add(90 * time.Second).Format(http.TimeFormat)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		retryAfterSink, retryAfterOKSink = retry.ParseRetryAfter(value, raNow)
	}
}

func BenchmarkRetryAfterAPIError(b *testing.B) {
	err := fmt.Errorf("update: %w", apierrors.NewTooManyRequests("slow down", 5))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		retryAfterSink, retryAfterOKSink = retry.RetryAfter(err)
	}
}
