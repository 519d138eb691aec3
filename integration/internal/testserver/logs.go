package testserver

import (
	"flag"
	"io"

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
