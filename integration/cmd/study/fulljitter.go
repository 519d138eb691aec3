package main

import (
	"math/rand/v2"
	"time"

	"github.com/kuberetry/retry"
)

// fullJitter stands in for retry.WithFullJitter until it lands: a sleeper
// that sleeps a uniform random fraction of each wait is the same policy
// for loops without Retry-After or WithMaxDelay, as here.
func fullJitter() retry.Option { return retry.WithSleeper(fractionSleeper{}) }

type fractionSleeper struct{}

func (fractionSleeper) Sleep(d time.Duration) { time.Sleep(time.Duration(rand.Float64() * float64(d))) }
