// Package fleetsim runs the fleet simulation of docs/fleet.md (package
// apfsim) at 48 to 50,000 processes and draws its figures. The runs are a
// test (fleetsim_test.go), as testing/synctest's fake clock runs only in
// one: make fleetsim runs it with -fleetsim, writes docs/fleet-sim.csv and
// the plots, and fails when NewBudget() misses a goal at 5,000 processes.
// Without -fleetsim, go test runs only the cheap checks.
package fleetsim
