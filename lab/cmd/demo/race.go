package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kuberetry/retry"
	"github.com/kuberetry/retry/integration/testenv/contention"
	"github.com/kuberetry/retry/integration/testenv/reqcount"
)

// raceResult is what a create-or-update race produced: a Result whose
// Final is the number of writers' keys the object holds, and the calls
// that created it.
type raceResult struct {
	contention.Result
	Created int // calls that returned retry.ResultCreated
}

// raceKey is the data key writer w sets in a create-or-update race.
func raceKey(w int) string { return fmt.Sprintf("writer-%d", w) }

// raceCreateOrUpdate lets cfg.Writers goroutines, released together, call
// retry.CreateOrUpdate once each with backoff b and opts on the ConfigMap cfg.Name,
// which must not exist: each builds it by name and adds its own key, the
// way reconcilers racing to create the same child do. One call creates it;
// the others meet AlreadyExists or a Conflict, retry, and update it. The
// result's Final counts the writers' keys the object holds afterwards,
// which must equal the calls that succeeded. cfg.Updates, cfg.Current and
// cfg.Progress are not used.
func raceCreateOrUpdate(ctx context.Context, name string, b retry.Backoff, cfg contention.Config, opts ...retry.Option) (raceResult, error) {
	writers, err := cfg.WriterConfigMaps()
	if err != nil {
		return raceResult{}, err
	}
	res := raceResult{Result: contention.Result{Strategy: name, Writers: cfg.Writers, Calls: make([]contention.Call, cfg.Writers)}}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		release = make(chan struct{})
		before  = snapshot(cfg)
	)
	for w := range cfg.Writers {
		wg.Go(func() {
			cms := writers[w]
			c := &res.Calls[w]
			desired := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace}}
			get := func(ctx context.Context) (*corev1.ConfigMap, error) {
				c.Gets++
				return cms.Get(ctx, cfg.Name, metav1.GetOptions{})
			}
			mutate := func(cm *corev1.ConfigMap) error {
				if cm.Data == nil {
					cm.Data = map[string]string{}
				}
				cm.Data[raceKey(w)] = "1"
				return nil
			}
			count := func(err error) error {
				// A 409 either way: another writer created or changed it.
				if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
					c.Conflicts++
				}
				return err
			}
			create := func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
				cm, err := cms.Create(ctx, cm, metav1.CreateOptions{})
				return cm, count(err)
			}
			update := func(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
				cm, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
				return cm, count(err)
			}
			<-release
			t0 := time.Now()
			var did retry.Result
			_, did, c.Err = retry.CreateOrUpdate(ctx, b, desired, get, mutate, create, update,
				slices.Concat(opts, []retry.Option{retry.WithOnDone(func(e retry.DoneEvent) { c.Attempts = e.Attempts })})...)
			c.Latency = time.Since(t0)
			if did == retry.ResultCreated {
				mu.Lock()
				res.Created++
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	close(release)
	wg.Wait()
	res.Wall = time.Since(start)
	if cfg.Requests != nil {
		res.Requests = cfg.Requests.Snapshot().Sub(before)
	}

	cm, err := cfg.Client.CoreV1().ConfigMaps(cfg.Namespace).Get(ctx, cfg.Name, metav1.GetOptions{})
	if err != nil {
		return res, fmt.Errorf("read the raced object back: %w", err)
	}
	for w := range cfg.Writers {
		if cm.Data[raceKey(w)] == "1" {
			res.Final++
		}
	}
	return res, nil
}

// snapshot returns cfg.Requests' counts so far, or nil.
func snapshot(cfg contention.Config) reqcount.Counts {
	if cfg.Requests == nil {
		return nil
	}
	return cfg.Requests.Snapshot()
}

// raceProblems lists the ways a race broke CreateOrUpdate's promises,
// each prefixed with label: not exactly one call created the object, the
// object lacks a key whose call returned nil or holds one whose call
// failed, a call gave up on something other than a 409 (AlreadyExists or
// Conflict), a call made more than steps attempts.
func raceProblems(label string, steps int, res raceResult) []string {
	sum := contention.Summarize(res.Result)
	var problems []string
	if res.Created != 1 {
		problems = append(problems, fmt.Sprintf("%s: %d calls created the object, want 1", label, res.Created))
	}
	if sum.Final != sum.Succeeded {
		problems = append(problems, fmt.Sprintf("%s: the object holds %d writers' keys but %d calls succeeded", label, sum.Final, sum.Succeeded))
	}
	for _, c := range res.Calls {
		if c.Err != nil && !apierrors.IsConflict(c.Err) && !apierrors.IsAlreadyExists(c.Err) {
			problems = append(problems, fmt.Sprintf("%s: a call gave up on something other than a 409: %v", label, c.Err))
			break
		}
	}
	if sum.MaxAttempts > steps {
		problems = append(problems, fmt.Sprintf("%s: a call made %d attempts, more than Steps %d", label, sum.MaxAttempts, steps))
	}
	return problems
}
