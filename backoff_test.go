package retry_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kuberetry/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// largestDuration is the value Step and Jitter saturate at.
const largestDuration = time.Duration(math.MaxInt64)

// randSeq returns a WithRand source that yields vals in order, then repeats
// the last one.
func randSeq(vals ...float64) func() float64 {
	i := 0
	return func() float64 {
		v := vals[min(i, len(vals)-1)]
		i++
		return v
	}
}

// satDuration converts x to a Duration the way the contract describes
// saturation: values past the int64 range clamp to its ends, and NaN (0
// times an infinity) is 0. The tests use it to bound jittered waits.
func satDuration(x float64) time.Duration {
	switch {
	case math.IsNaN(x):
		return 0
	case x >= 1<<63:
		return largestDuration
	case x < -(1 << 63):
		return math.MinInt64
	}
	return time.Duration(x)
}

// jitterUpper is the largest wait Step may return for a current duration d
// and a jitter factor j > 0: d + j*d, saturated.
func jitterUpper(d time.Duration, j float64) time.Duration {
	extra := satDuration(j * float64(d))
	if d > 0 && extra > largestDuration-d {
		return largestDuration
	}
	return d + extra
}

// TestBackoffStepMatchesApimachinery steps a retry.Backoff and the same
// wait.Backoff side by side: each returned wait and the state after each
// step must be identical, including after Steps runs out.
func TestBackoffStepMatchesApimachinery(t *testing.T) {
	t.Parallel()
	noJitter := func(b retry.Backoff) retry.Backoff { b.Jitter = 0; return b }
	tests := []struct {
		name  string
		b     retry.Backoff
		steps int
	}{
		{"zero value", retry.Backoff{}, 3},
		{"one step, factor 0", retry.Backoff{Duration: 10 * time.Millisecond, Steps: 1}, 3},
		{"DefaultRetry without jitter", noJitter(retry.DefaultRetry), 8},
		{"DefaultBackoff without jitter", noJitter(retry.DefaultBackoff), 8},
		{"DefaultRetryAfterBackoff", retry.DefaultRetryAfterBackoff, 13},
		{"fractional factor truncates", retry.Backoff{Duration: 3, Factor: 1.5, Steps: 20}, 22},
		{"factor below 1 shrinks", retry.Backoff{Duration: time.Second, Factor: 0.5, Steps: 5}, 8},
		{"cap hit ends growth", retry.Backoff{Duration: time.Second, Factor: 2, Steps: 10, Cap: 5 * time.Second}, 8},
		{"next equal to cap is not a hit", retry.Backoff{Duration: time.Second, Factor: 2, Steps: 10, Cap: 4 * time.Second}, 8},
		{"duration above cap, factor 1", retry.Backoff{Duration: 10 * time.Second, Factor: 1, Steps: 3, Cap: time.Second}, 5},
		{"factor 0 ignores cap", retry.Backoff{Duration: 10 * time.Second, Steps: 3, Cap: time.Second}, 5},
		{"steps 0 keeps duration", retry.Backoff{Duration: time.Second, Factor: 2}, 3},
		{"negative steps become 0", retry.Backoff{Duration: time.Second, Factor: 2, Steps: -7}, 3},
		{"zero duration never grows", retry.Backoff{Factor: 2, Steps: 5}, 7},
		{"steps MaxInt", retry.Backoff{Duration: time.Millisecond, Factor: 1.1, Steps: math.MaxInt}, 50},
		{"large but fitting", retry.Backoff{Duration: time.Hour, Factor: 10, Steps: 6}, 8},
		{"product just below 2^63", retry.Backoff{Duration: largestDuration / 2, Factor: 1.9, Steps: 1}, 3},
		{"negative cap is no cap", retry.Backoff{Duration: time.Second, Factor: 2, Steps: 4, Cap: -time.Second}, 6},
		{"negative jitter is no jitter", retry.Backoff{Duration: time.Second, Factor: 2, Steps: 3, Jitter: -0.5}, 5},
		{"NaN jitter is no jitter", retry.Backoff{Duration: time.Second, Factor: 2, Steps: 3, Jitter: math.NaN()}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, want := tt.b, wait.Backoff(tt.b)
			for i := range tt.steps {
				require.Equal(t, want.Step(), got.Step(), "wait returned by step %d", i+1)
				// Compare fields one by one: a NaN Jitter makes whole-struct
				// equality fail even when nothing differs.
				require.Equal(t, want.Duration, got.Duration, "Duration after step %d", i+1)
				require.Equal(t, want.Steps, got.Steps, "Steps after step %d", i+1)
				require.Equal(t, want.Cap, got.Cap, "Cap after step %d", i+1)
				require.Equal(t, math.Float64bits(want.Factor), math.Float64bits(got.Factor), "Factor after step %d", i+1)
				require.Equal(t, math.Float64bits(want.Jitter), math.Float64bits(got.Jitter), "Jitter after step %d", i+1)
			}
		})
	}
}

func TestBackoffStepNilReceiver(t *testing.T) {
	t.Parallel()
	var b *retry.Backoff
	var w *wait.Backoff
	assert.Equal(t, w.Step(), b.Step())
	assert.Zero(t, b.Step())
}

// TestBackoffStepSaturates covers the inputs where apimachinery's
// float-to-Duration conversion overflows (its result is then
// implementation-defined, negative on amd64): ours clamps at the largest
// Duration, and Cap applies to the clamped value.
func TestBackoffStepSaturates(t *testing.T) {
	t.Parallel()
	type step struct {
		ret, dur time.Duration
		steps    int
	}
	tests := []struct {
		name string
		b    retry.Backoff
		want []step
	}{
		{
			name: "huge factor",
			b:    retry.Backoff{Duration: time.Second, Factor: 1e300, Steps: 3},
			want: []step{{time.Second, largestDuration, 2}, {largestDuration, largestDuration, 1}, {largestDuration, largestDuration, 0}, {largestDuration, largestDuration, 0}},
		},
		{
			name: "infinite factor",
			b:    retry.Backoff{Duration: 1, Factor: math.Inf(1), Steps: 2},
			want: []step{{1, largestDuration, 1}, {largestDuration, largestDuration, 0}},
		},
		{
			name: "largest duration doubled",
			b:    retry.Backoff{Duration: largestDuration, Factor: 2, Steps: 2},
			want: []step{{largestDuration, largestDuration, 1}, {largestDuration, largestDuration, 0}},
		},
		{
			name: "product exactly 2^63",
			b:    retry.Backoff{Duration: 1 << 62, Factor: 2, Steps: 1},
			want: []step{{1 << 62, largestDuration, 0}, {largestDuration, largestDuration, 0}},
		},
		{
			name: "saturated then capped",
			b:    retry.Backoff{Duration: time.Second, Factor: 1e300, Steps: 5, Cap: time.Hour},
			want: []step{{time.Second, time.Hour, 0}, {time.Hour, time.Hour, 0}},
		},
		{
			name: "largest duration capped",
			b:    retry.Backoff{Duration: largestDuration, Factor: 2, Steps: 5, Cap: time.Hour},
			want: []step{{largestDuration, time.Hour, 0}, {time.Hour, time.Hour, 0}},
		},
		{
			name: "cap equal to the saturated value is not a hit",
			b:    retry.Backoff{Duration: time.Second, Factor: 1e300, Steps: 3, Cap: largestDuration},
			want: []step{{time.Second, largestDuration, 2}, {largestDuration, largestDuration, 1}},
		},
		{
			name: "huge jitter on the largest duration",
			b:    retry.Backoff{Duration: largestDuration, Factor: 1, Jitter: 10, Steps: 2},
			want: []step{{largestDuration, largestDuration, 1}, {largestDuration, largestDuration, 0}, {largestDuration, largestDuration, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := tt.b
			for i, w := range tt.want {
				got := b.Step()
				assert.Equal(t, w.ret, got, "wait returned by step %d", i+1)
				assert.Equal(t, w.dur, b.Duration, "Duration after step %d", i+1)
				assert.Equal(t, w.steps, b.Steps, "Steps after step %d", i+1)
			}
		})
	}
}

// TestBackoffStepNegativeDuration: apimachinery returns the negative value;
// ours returns 0 but otherwise keeps the same (unvalidated) state.
func TestBackoffStepNegativeDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		b    retry.Backoff
	}{
		{"negative duration", retry.Backoff{Duration: -time.Second, Factor: 2, Steps: 2}},
		{"negative duration, steps 0", retry.Backoff{Duration: -time.Second}},
		{"negative factor turns duration negative", retry.Backoff{Duration: time.Second, Factor: -1, Steps: 3}},
		{"most negative duration", retry.Backoff{Duration: math.MinInt64 / 2, Factor: 1.5, Steps: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, want := tt.b, wait.Backoff(tt.b)
			for i := range 4 {
				require.Equal(t, max(want.Step(), 0), got.Step(), "wait returned by step %d", i+1)
				require.Equal(t, want, wait.Backoff(got), "state after step %d", i+1)
			}
		})
	}
}

// TestBackoffStepHostile feeds Step the values Validate rejects: every wait
// must still be non-negative, and a step that grows toward a positive Cap
// must not pass it.
func TestBackoffStepHostile(t *testing.T) {
	t.Parallel()
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		b    retry.Backoff
	}{
		{"NaN factor", retry.Backoff{Duration: time.Second, Factor: nan, Steps: 5, Cap: time.Minute}},
		{"+Inf factor", retry.Backoff{Duration: time.Second, Factor: inf, Steps: 5}},
		{"-Inf factor", retry.Backoff{Duration: time.Second, Factor: -inf, Steps: 5, Cap: time.Minute}},
		{"+Inf factor on zero duration", retry.Backoff{Factor: inf, Steps: 5}},
		{"negative factor", retry.Backoff{Duration: time.Second, Factor: -3, Steps: 5}},
		{"+Inf jitter", retry.Backoff{Duration: time.Second, Factor: 2, Jitter: inf, Steps: 5}},
		{"-Inf jitter", retry.Backoff{Duration: time.Second, Factor: 2, Jitter: -inf, Steps: 5}},
		{"huge jitter on negative duration", retry.Backoff{Duration: -time.Second, Factor: 2, Jitter: 1e300, Steps: 5}},
		{"most negative duration", retry.Backoff{Duration: math.MinInt64, Factor: 2, Jitter: 0.5, Steps: 5}},
		{"negative cap", retry.Backoff{Duration: time.Second, Factor: 1e300, Steps: 5, Cap: -time.Second}},
		{"everything at once", retry.Backoff{Duration: largestDuration, Factor: inf, Jitter: inf, Steps: math.MaxInt, Cap: math.MinInt64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorIs(t, tt.b.Validate(), retry.ErrInvalidBackoff)
			b := tt.b
			for i := range 100 {
				before := b
				got := b.Step()
				require.GreaterOrEqual(t, got, time.Duration(0), "wait returned by step %d", i+1)
				if before.Steps >= 1 && before.Factor != 0 && before.Cap > 0 {
					require.LessOrEqual(t, b.Duration, before.Cap, "Duration after step %d", i+1)
				}
			}
		})
	}
}

// TestBackoffStepJitterBounds: Step's jitter comes from the global source,
// so only its bounds are asserted: d <= wait <= d + Jitter*d, where d is the
// duration apimachinery would return, and the state after each step is
// apimachinery's, which shows that jitter never feeds into Duration.
func TestBackoffStepJitterBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		b    retry.Backoff
	}{
		{"DefaultRetry", retry.DefaultRetry},
		{"DefaultBackoff", retry.DefaultBackoff},
		{"jitter 1 with cap", retry.Backoff{Duration: time.Second, Factor: 3, Jitter: 1, Steps: 6, Cap: time.Minute}},
		{"jitter 3", retry.Backoff{Duration: time.Millisecond, Factor: 2, Jitter: 3, Steps: 10}},
		{"steps 0 still jitters", retry.Backoff{Duration: time.Second, Jitter: 0.5}},
		{"tiny duration", retry.Backoff{Duration: 1, Factor: 1, Jitter: 0.9, Steps: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var jittered bool
			for range 200 {
				got, oracle := tt.b, wait.Backoff(tt.b)
				oracle.Jitter = 0 // the oracle supplies the unjittered wait
				for i := range tt.b.Steps + 2 {
					d := oracle.Step()
					w := got.Step()
					require.GreaterOrEqual(t, w, d, "step %d", i+1)
					require.LessOrEqual(t, w, jitterUpper(d, tt.b.Jitter), "step %d", i+1)
					jittered = jittered || w > d
					require.Equal(t, oracle.Duration, got.Duration, "Duration after step %d", i+1)
					require.Equal(t, oracle.Steps, got.Steps, "Steps after step %d", i+1)
				}
			}
			if tt.b.Duration > 1 {
				// With 200 and more draws, a wait above d is all but certain;
				// never seeing one means jitter is not applied.
				assert.True(t, jittered, "no wait was ever jittered")
			}
		})
	}
}

// TestBackoffJitterThroughLoop asserts exact jittered waits, which the loops
// allow through WithRand: wait = d + r*Jitter*d, d from apimachinery.
func TestBackoffJitterThroughLoop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		b     retry.Backoff
		rands []float64
	}{
		{"DefaultBackoff", retry.DefaultBackoff, []float64{0, 0.5, 0.999}},
		{"growing with jitter 0.5", retry.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 5}, []float64{0.25, 0.5, 0.75, 0.125}},
		{"jitter 2", retry.Backoff{Duration: 7 * time.Millisecond, Factor: 1.3, Jitter: 2, Steps: 4}, []float64{0.1, 0.9, 0.33}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var want []time.Duration
			oracle := wait.Backoff(tt.b)
			oracle.Jitter = 0
			for _, r := range tt.rands[:tt.b.Steps-1] {
				d := oracle.Step()
				want = append(want, d+time.Duration(r*tt.b.Jitter*float64(d)))
			}

			var sleeper fakeSleeper
			errRetry := errors.New("again")
			err := retry.OnError(tt.b, func(error) bool { return true }, func() error { return errRetry },
				retry.WithSleeper(&sleeper), retry.WithRand(randSeq(tt.rands...)))
			require.Same(t, errRetry, err)
			assert.Equal(t, want, sleeper.waits)
		})
	}
}

// TestBackoffJitterSaturatesThroughLoop: a jittered wait that would overflow
// is the largest Duration, never a wrapped-around negative one.
func TestBackoffJitterSaturatesThroughLoop(t *testing.T) {
	t.Parallel()
	b := retry.Backoff{Duration: largestDuration / 2, Factor: 1, Jitter: 10, Steps: 3}
	var sleeper fakeSleeper
	err := retry.OnError(b, func(error) bool { return true }, func() error { return errors.New("again") },
		retry.WithSleeper(&sleeper), retry.WithRand(randSeq(0.9)))
	require.Error(t, err)
	assert.Equal(t, []time.Duration{largestDuration, largestDuration}, sleeper.waits)
}

func TestBackoffValidate(t *testing.T) {
	t.Parallel()
	valid := retry.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 3, Cap: time.Minute}
	with := func(f func(*retry.Backoff)) retry.Backoff { b := valid; f(&b); return b }
	fields := []string{"Duration", "Factor", "Jitter", "Steps", "Cap"}
	tests := []struct {
		name string
		b    retry.Backoff
		// bad lists each invalid field with how its value must appear in
		// the message; empty means valid.
		bad map[string]string
	}{
		{"valid", valid, nil},
		{"one step, rest zero", retry.Backoff{Steps: 1}, nil},
		{"DefaultRetry", retry.DefaultRetry, nil},
		{"DefaultBackoff", retry.DefaultBackoff, nil},
		{"DefaultRetryAfterBackoff", retry.DefaultRetryAfterBackoff, nil},
		{"largest values", retry.Backoff{Duration: largestDuration, Factor: math.MaxFloat64, Jitter: math.MaxFloat64, Steps: math.MaxInt, Cap: largestDuration}, nil},
		{"negative zero factor and jitter", with(func(b *retry.Backoff) { b.Factor = math.Copysign(0, -1); b.Jitter = math.Copysign(0, -1) }), nil},
		{"WithMaxRetries(0) of the zero value", retry.Backoff{}.WithMaxRetries(0), nil},

		{"zero value", retry.Backoff{}, map[string]string{"Steps": "0"}},
		{"Steps 0", with(func(b *retry.Backoff) { b.Steps = 0 }), map[string]string{"Steps": "0"}},
		{"negative Steps", with(func(b *retry.Backoff) { b.Steps = -3 }), map[string]string{"Steps": "-3"}},
		{"MinInt Steps", with(func(b *retry.Backoff) { b.Steps = math.MinInt }), map[string]string{"Steps": fmt.Sprint(math.MinInt)}},
		{"negative Duration", with(func(b *retry.Backoff) { b.Duration = -time.Second }), map[string]string{"Duration": "-1s"}},
		{"MinInt64 Duration", with(func(b *retry.Backoff) { b.Duration = math.MinInt64 }), map[string]string{"Duration": time.Duration(math.MinInt64).String()}},
		{"negative Cap", with(func(b *retry.Backoff) { b.Cap = -5 * time.Millisecond }), map[string]string{"Cap": "-5ms"}},
		{"negative Factor", with(func(b *retry.Backoff) { b.Factor = -2 }), map[string]string{"Factor": "-2"}},
		{"NaN Factor", with(func(b *retry.Backoff) { b.Factor = math.NaN() }), map[string]string{"Factor": "NaN"}},
		{"+Inf Factor", with(func(b *retry.Backoff) { b.Factor = math.Inf(1) }), map[string]string{"Factor": "+Inf"}},
		{"-Inf Factor", with(func(b *retry.Backoff) { b.Factor = math.Inf(-1) }), map[string]string{"Factor": "-Inf"}},
		{"negative Jitter", with(func(b *retry.Backoff) { b.Jitter = -0.1 }), map[string]string{"Jitter": "-0.1"}},
		{"NaN Jitter", with(func(b *retry.Backoff) { b.Jitter = math.NaN() }), map[string]string{"Jitter": "NaN"}},
		{"+Inf Jitter", with(func(b *retry.Backoff) { b.Jitter = math.Inf(1) }), map[string]string{"Jitter": "+Inf"}},
		{
			"every field invalid",
			retry.Backoff{Duration: -time.Minute, Factor: math.NaN(), Jitter: -1, Steps: -1, Cap: -time.Hour},
			map[string]string{"Duration": "-1m0s", "Factor": "NaN", "Jitter": "-1", "Steps": "-1", "Cap": "-1h0m0s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.b.Validate()
			if len(tt.bad) == 0 {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, retry.ErrInvalidBackoff)
			msg := err.Error()
			assert.NotEqual(t, retry.ErrInvalidBackoff.Error(), msg, "the message must say what is wrong")
			for _, f := range fields {
				value, isBad := tt.bad[f]
				if !isBad {
					assert.NotContains(t, msg, f, "only invalid fields are named")
					continue
				}
				assert.Contains(t, msg, f+" "+value, "the field and its value are named")
			}
		})
	}
}

func TestBackoffWithMaxRetries(t *testing.T) {
	t.Parallel()
	base := retry.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.3, Steps: 7, Cap: time.Hour}
	tests := []struct {
		n         int
		wantSteps int
	}{
		{0, 1},
		{1, 2},
		{10, 11},
		{-1, 1},
		{math.MinInt, 1},
		{math.MaxInt - 1, math.MaxInt},
		{math.MaxInt, math.MaxInt}, // n+1 would wrap to MinInt
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			t.Parallel()
			orig := base
			got := orig.WithMaxRetries(tt.n)
			want := base
			want.Steps = tt.wantSteps
			assert.Equal(t, want, got)
			assert.Equal(t, base, orig, "the receiver is not changed")
			assert.NoError(t, got.Validate())
		})
	}
}

// TestBackoffWithMaxRetriesAttempts: n retries mean n+1 calls of fn.
func TestBackoffWithMaxRetriesAttempts(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-5, 0, 1, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			calls := 0
			var sleeper fakeSleeper
			err := retry.OnError(retry.Backoff{Duration: time.Hour}.WithMaxRetries(n), func(error) bool { return true },
				func() error { calls++; return errors.New("again") }, retry.WithSleeper(&sleeper))
			require.Error(t, err)
			assert.Equal(t, max(n, 0)+1, calls)
			assert.Len(t, sleeper.waits, max(n, 0))
		})
	}
}

func TestJitter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		d         time.Duration
		maxFactor float64
		// lo and hi bound every result; above, when set, must be passed by
		// some result, which shows how large maxFactor really was.
		lo, hi, above time.Duration
	}{
		{"factor 0.5", time.Second, 0.5, time.Second, 1500 * time.Millisecond, 1250 * time.Millisecond},
		{"factor 2", time.Second, 2, time.Second, 3 * time.Second, 2500 * time.Millisecond},
		{"factor 0 means 1", time.Second, 0, time.Second, 2 * time.Second, 1500 * time.Millisecond},
		{"negative factor means 1", time.Second, -3, time.Second, 2 * time.Second, 1500 * time.Millisecond},
		{"NaN factor means 1", time.Second, math.NaN(), time.Second, 2 * time.Second, 1500 * time.Millisecond},
		{"zero duration", 0, 1, 0, 0, 0},
		{"largest duration saturates", largestDuration, 1, largestDuration, largestDuration, 0},
		{"half the largest duration, factor 3", largestDuration / 2, 3, largestDuration / 2, largestDuration, 0},
		{"huge factor saturates", time.Second, 1e300, time.Second, largestDuration, 0},
		{"infinite factor", time.Second, math.Inf(1), time.Second, largestDuration, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var seenAbove bool
			for range 1000 {
				got := retry.Jitter(tt.d, tt.maxFactor)
				require.GreaterOrEqual(t, got, tt.lo)
				require.LessOrEqual(t, got, tt.hi)
				seenAbove = seenAbove || got > tt.above
			}
			if tt.above > 0 {
				assert.True(t, seenAbove, "no result above %v in 1000 draws", tt.above)
			}
		})
	}
}

// TestBackoffConvertsToAndFromWaitBackoff: the two types convert both ways,
// which holds only while their fields match in name, type and order.
func TestBackoffConvertsToAndFromWaitBackoff(t *testing.T) {
	t.Parallel()
	w := wait.Backoff{Duration: 3 * time.Second, Factor: 1.7, Jitter: 0.2, Steps: 9, Cap: time.Minute}
	b := retry.Backoff(w)
	assert.Equal(t, retry.Backoff{Duration: 3 * time.Second, Factor: 1.7, Jitter: 0.2, Steps: 9, Cap: time.Minute}, b)
	assert.Equal(t, w, wait.Backoff(b))
	assert.Equal(t, retry.DefaultRetry, retry.Backoff(wait.Backoff(retry.DefaultRetry)))
}

// FuzzBackoffStep checks, for any field values, that Step never returns a
// negative wait, never leaves Duration above a positive Cap after a growing
// step, keeps jitter out of the stored state, and equals apimachinery's Step
// wherever apimachinery's own arithmetic is well defined.
func FuzzBackoffStep(f *testing.F) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, b := range []retry.Backoff{
		{},
		retry.DefaultRetry,
		retry.DefaultBackoff,
		retry.DefaultRetryAfterBackoff,
		{Duration: time.Second, Factor: 2, Steps: 10, Cap: 5 * time.Second},
		{Duration: time.Second, Factor: 1e300, Steps: 3},
		{Duration: largestDuration, Factor: 2, Steps: 2, Cap: time.Hour},
		{Duration: 1 << 62, Factor: 2, Steps: 1},
		{Duration: largestDuration / 2, Factor: 1.9, Steps: 1},
		{Duration: math.MinInt64, Factor: 2, Jitter: 0.5, Steps: 5},
		{Duration: -time.Second, Factor: 2, Jitter: 1e300, Steps: 5},
		{Duration: time.Second, Factor: nan, Jitter: nan, Steps: 5, Cap: time.Minute},
		{Duration: time.Second, Factor: inf, Jitter: inf, Steps: math.MaxInt, Cap: math.MinInt64},
		{Factor: inf, Jitter: inf, Steps: 1},
		{Duration: time.Second, Factor: -inf, Jitter: -inf, Steps: math.MinInt, Cap: 1},
		{Duration: largestDuration, Factor: math.MaxFloat64, Jitter: math.SmallestNonzeroFloat64, Steps: 1, Cap: largestDuration},
	} {
		f.Add(int64(b.Duration), b.Factor, b.Jitter, b.Steps, int64(b.Cap))
	}
	f.Fuzz(func(t *testing.T, duration int64, factor, jitter float64, steps int, capDur int64) {
		b := retry.Backoff{Duration: time.Duration(duration), Factor: factor, Jitter: jitter, Steps: steps, Cap: time.Duration(capDur)}
		oracle := wait.Backoff(b)
		matching := true // oracle has been stepped in lockstep so far
		for i := range 4 {
			before := b
			got := b.Step()

			require.GreaterOrEqual(t, got, time.Duration(0), "step %d of %+v", i+1, before)
			if before.Steps >= 1 && before.Factor != 0 && before.Cap > 0 {
				require.LessOrEqual(t, b.Duration, before.Cap, "Duration after step %d of %+v", i+1, before)
			}
			if before.Duration >= 0 && before.Jitter > 0 {
				require.GreaterOrEqual(t, got, before.Duration, "step %d of %+v", i+1, before)
				require.LessOrEqual(t, got, jitterUpper(before.Duration, before.Jitter), "step %d of %+v", i+1, before)
			}

			// The same step without jitter leaves the same state.
			plain := before
			plain.Jitter = 0
			plain.Step()
			require.Equal(t, plain.Duration, b.Duration, "Duration after step %d of %+v", i+1, before)
			require.Equal(t, plain.Steps, b.Steps, "Steps after step %d of %+v", i+1, before)
			require.Equal(t, before.Cap, b.Cap)
			require.Equal(t, math.Float64bits(before.Factor), math.Float64bits(b.Factor))
			require.Equal(t, math.Float64bits(before.Jitter), math.Float64bits(b.Jitter))

			matching = matching && oracleSafe(before)
			if matching {
				require.Equal(t, oracle.Step(), got, "step %d of %+v", i+1, before)
				require.Equal(t, oracle, wait.Backoff(b), "state after step %d of %+v", i+1, before)
			}
		}
	})
}

var stepSink time.Duration

func BenchmarkBackoffStep(b *testing.B) {
	base := retry.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 10}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		bo := base // a caller starts each retry sequence from its configured value
		stepSink = bo.Step()
	}
}

func TestInvalidBackoffErrorIsValidates(t *testing.T) {
	t.Parallel()
	b := retry.Backoff{Steps: 0, Factor: -2}
	err := retry.OnError(b, apierrors.IsConflict, func() error { return nil })
	require.Error(t, err)
	assert.Equal(t, b.Validate().Error(), err.Error())
	assert.Contains(t, err.Error(), "Steps 0")
	assert.Contains(t, err.Error(), "Factor -2")
}
