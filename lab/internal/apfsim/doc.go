// Package apfsim simulates a fleet of controller processes against one API
// Priority and Fairness priority level of a kube-apiserver, for
// docs/fleet.md: the processes are goroutines, each with its own
// retry.Budget (the library's own code, over its WrapTransport), the
// apiserver a model of the level (Level) as an http.RoundTripper, and
// client-go's resends a model of its rest.Request's (Client). Run inside a
// testing/synctest bubble, every timer (the Budget's holds and probes, the
// workers' waits, the requests' execution) runs on the bubble's fake clock,
// so minutes of 50,000 processes take no minutes of waiting.
package apfsim
