// Package bench holds the side-by-side benchmarks of this library and
// client-go (bench_test.go): the same operation for each, as sub-benchmarks
// impl=kuberetry and impl=clientgo, for benchstat -col /impl. It imports
// neither the test server nor k8s.io/kubernetes, so it builds in seconds.
// The checker of the performance targets is in ./benchcheck.
package bench
