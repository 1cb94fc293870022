package app

import (
	"context"
	"strings"
	"time"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// reporter keeps the watcher_watched_objects gauge up to date (every
// gaugeInterval) and logs, once the store has synced and then every
// PrintInterval, the ignored namespaces and how many objects are watched.
type reporter struct {
	store *store.Store
	opts  *options.Options
	log   logr.Logger
}

// gaugeInterval is how often the gauge is refreshed.
const gaugeInterval = 15 * time.Second

func (r *reporter) NeedLeaderElection() bool { return false }

func (r *reporter) Start(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), r.store.HasSynced) {
		return nil
	}
	gauge := time.NewTicker(gaugeInterval)
	defer gauge.Stop()
	var print <-chan time.Time
	if r.opts.PrintInterval > 0 {
		t := time.NewTicker(r.opts.PrintInterval)
		defer t.Stop()
		print = t.C
	}
	r.report(ctx, r.opts.PrintInterval > 0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-gauge.C:
			r.report(ctx, false)
		case <-print:
			r.report(ctx, true)
		}
	}
}

func (r *reporter) report(ctx context.Context, print bool) {
	kv := []any{
		"ignoredConfigMapNamespaces", r.opts.IgnoreConfigMapNamespaces,
		"ignoredSecretNamespaces", r.opts.IgnoreSecretNamespaces,
	}
	kinds := []string{"ConfigMap", "Secret"}
	for _, k := range workload.Kinds {
		kinds = append(kinds, k.Name())
	}
	for _, kind := range kinds {
		n := r.store.Count(kind)
		metrics.Watched.WithLabelValues(kind).Set(float64(n))
		kv = append(kv, strings.ToLower(kind[:1])+kind[1:]+"s", n) // e.g. configMaps
	}
	if print {
		r.log.Info("Watching", kv...)
	}
}
