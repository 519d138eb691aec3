package testserver

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// ProcessTB lets a program that is not a test (the contention demo) call
// Start, which is written against the testing API: it collects cleanups,
// which Close runs, and writes the server's log to a writer of the caller's
// choosing. A fatal error panics, since there is no test to fail.
type ProcessTB struct {
	log io.Writer

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

// NewProcessTB returns a ProcessTB that writes log lines to log
// (io.Discard for none).
func NewProcessTB(log io.Writer) *ProcessTB {
	return &ProcessTB{log: log}
}

// Close runs the registered cleanups, last registered first.
func (p *ProcessTB) Close() {
	for {
		p.mu.Lock()
		n := len(p.cleanups)
		if n == 0 {
			p.mu.Unlock()
			return
		}
		f := p.cleanups[n-1]
		p.cleanups = p.cleanups[:n-1]
		p.mu.Unlock()
		f()
	}
}

// The remaining methods of the testing API that the apiserver's test
// harness may call: logs go to the log writer, and a skip is a failure,
// since the demo cannot go on without a server.

// Attr does nothing.
func (p *ProcessTB) Attr(key, value string) {}

// Chdir changes the process's working directory.
func (p *ProcessTB) Chdir(dir string) { _ = os.Chdir(dir) }

// Helper does nothing.
func (p *ProcessTB) Helper() {}

// Name names the program in the harness's messages.
func (p *ProcessTB) Name() string { return "kuberetry" }

// Setenv sets an environment variable of the process.
func (p *ProcessTB) Setenv(key, value string) { _ = os.Setenv(key, value) }

// Skip fails like Fatal.
func (p *ProcessTB) Skip(args ...any) { p.Fatal(args...) }

// Skipf fails like Fatalf.
func (p *ProcessTB) Skipf(f string, a ...any) { p.Fatalf(f, a...) }

// SkipNow fails like FailNow.
func (p *ProcessTB) SkipNow() { p.FailNow() }

// Skipped reports false: nothing is ever skipped.
func (p *ProcessTB) Skipped() bool { return false }

// Log writes args as a line to the log writer.
func (p *ProcessTB) Log(args ...any) { fmt.Fprintln(p.log, args...) }

// Logf writes a formatted line to the log writer.
func (p *ProcessTB) Logf(f string, args ...any) { fmt.Fprintf(p.log, f+"\n", args...) }

// Cleanup registers f to run in Close.
func (p *ProcessTB) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

// Error logs to standard error and marks the ProcessTB failed.
func (p *ProcessTB) Error(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	p.Fail()
}

// Errorf logs to standard error and marks the ProcessTB failed.
func (p *ProcessTB) Errorf(f string, args ...any) {
	fmt.Fprintf(os.Stderr, f+"\n", args...)
	p.Fail()
}

// Fail marks the ProcessTB failed.
func (p *ProcessTB) Fail() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = true
}

// Failed reports whether Error, Errorf or Fail was called.
func (p *ProcessTB) Failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// FailNow panics: a program has no test goroutine to stop.
func (p *ProcessTB) FailNow() {
	p.Fail()
	panic("testserver: fatal error")
}

// Fatal panics with the message.
func (p *ProcessTB) Fatal(args ...any) {
	p.Fail()
	panic(fmt.Sprint(args...))
}

// Fatalf panics with the message.
func (p *ProcessTB) Fatalf(f string, args ...any) {
	p.Fail()
	panic(fmt.Sprintf(f, args...))
}

// TempDir returns a new temporary directory, removed by Close.
func (p *ProcessTB) TempDir() string {
	dir, err := os.MkdirTemp("", "kuberetry-")
	if err != nil {
		p.Fatalf("TempDir: %v", err)
	}
	p.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
