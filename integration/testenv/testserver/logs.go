package testserver

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2"
)

// QuietGlobalLogs silences the process-wide klog output. Each apiserver
// logs to the ktesting logger of its TB, but much of kube-apiserver still
// writes to the global klog, which prints to standard error, including
// errors that are expected in a test server (no kube-system namespace
// yet, stale endpoints from a previous run, shutdown). They drown the
// test and demo output and say nothing about this library.
func QuietGlobalLogs() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for name, value := range map[string]string{
		"logtostderr":     "false",
		"alsologtostderr": "false",
		"stderrthreshold": "FATAL",
	} {
		if err := fs.Set(name, value); err != nil {
			panic(err)
		}
	}
	klog.SetOutput(io.Discard)
}

// BufferLogs returns a testing.TB that is t, except that its Log and Logf
// write to a buffer, which is logged to t when t has failed by the time its
// cleanups run. Given to Start, it keeps a server's log (a few hundred
// lines per start) out of the test's output unless the test fails.
func BufferLogs(t testing.TB) testing.TB {
	b := &bufferedLogTB{TB: t}
	t.Cleanup(func() { // registered first, so it runs after the servers stopped
		if t.Failed() {
			t.Logf("kube-apiserver log:\n%s", b.String())
		}
	})
	return b
}

// bufferedLogTB is a testing.TB whose Log and Logf write to a buffer.
type bufferedLogTB struct {
	testing.TB
	mu  sync.Mutex
	buf strings.Builder
}

func (b *bufferedLogTB) Log(args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintln(&b.buf, args...)
}

func (b *bufferedLogTB) Logf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(&b.buf, format+"\n", args...)
}

func (b *bufferedLogTB) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
