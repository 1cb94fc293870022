package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// changer makes the changes of the change phase.
type changer struct {
	cs  kubernetes.Interface
	s   Scenario
	log *progress

	mu   sync.Mutex
	made []applied
	sent atomic.Int64
}

// runChanges makes s.Changes controller changes and as many floor changes,
// interleaved and paced at s.Rate (see Scenario.At). Each change runs in
// its own goroutine at its due time, so a slow call does not delay the
// next. It returns what it changed; the first failed call ends it.
func runChanges(ctx context.Context, cs kubernetes.Interface, s Scenario, tw *templateWatch, log *progress) ([]applied, error) {
	ch := &changer{cs: cs, s: s, log: log}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	began := time.Now()
	stopTicker := log.every(3*time.Second, func() string {
		seen, _, _ := tw.snapshot()
		return fmt.Sprintf("changing: %d/%d changes sent, %d template changes seen",
			ch.sent.Load(), 2*s.Changes, countWithin(seen, began, time.Now().Add(time.Hour)))
	})
	defer stopTicker()
	var wg sync.WaitGroup
	for k := range s.Changes {
		for _, floor := range []bool{false, true} {
			timer := time.NewTimer(time.Until(began.Add(s.At(k, floor))))
			select {
			case <-ctx.Done():
				timer.Stop()
				wg.Wait()
				return nil, context.Cause(ctx)
			case <-timer.C:
			}
			wg.Go(func() {
				if err := ch.change(ctx, k, floor); err != nil {
					cancel(err)
				}
			})
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return ch.made, nil
}

// change makes the k-th controller change: it rewrites a config that
// workloads use, or the k-th floor change: it rewrites a floor config, then
// changes the pod template of the floor workload itself.
func (ch *changer) change(ctx context.Context, k int, floor bool) error {
	s := ch.s
	j, name := s.ChangedConfig(k), configName(s.ChangedConfig(k))
	if floor {
		j = k % s.FloorPairs()
		name = floorConfigName(j)
	}
	if err := ch.patchConfig(ctx, s.IsSecret(j), name, k+1); err != nil {
		return err
	}
	accepted := time.Now()
	ch.sent.Add(1)
	var made []applied
	if floor {
		_, err := ch.cs.AppsV1().Deployments(namespace).Patch(ctx, floorName(j), types.MergePatchType,
			floorPatch(k), metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("patch deployment %s: %w", floorName(j), err)
		}
		made = append(made, applied{Workload: floorName(j), Floor: true, Accepted: accepted})
	} else {
		for _, w := range s.Users(j) {
			made = append(made, applied{Workload: workloadName(w), Accepted: accepted})
		}
	}
	ch.mu.Lock()
	ch.made = append(ch.made, made...)
	ch.mu.Unlock()
	return nil
}

// patchConfig sets the data of a Secret or ConfigMap to a new version.
func (ch *changer) patchConfig(ctx context.Context, secret bool, name string, version int) error {
	patch, err := configPatch(secret, ch.s.Size, version)
	if err != nil {
		return err
	}
	if secret {
		_, err = ch.cs.CoreV1().Secrets(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = ch.cs.CoreV1().ConfigMaps(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("patch config %s: %w", name, err)
	}
	return nil
}

// waitAllSeen waits until every change in made has been seen as a template
// change since began, or for at most timeout, and returns how many are
// still missing.
func waitAllSeen(ctx context.Context, tw *templateWatch, made []applied, began time.Time, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		seen, _, err := tw.snapshot()
		if err != nil {
			return 0, err
		}
		missed := evaluate(made, seen, began, time.Now().Add(time.Hour)).Missed
		if missed == 0 || time.Now().After(deadline) {
			return missed, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
