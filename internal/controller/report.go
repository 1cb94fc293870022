package controller

import (
	"context"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/workload"
)

// reporter keeps the watcher_watched_objects gauge up to date (every
// gaugeInterval) and logs, once the caches have synced and then every
// PrintInterval, the ignored namespaces and how many objects are watched.
// Counting reads the cache only.
type reporter struct {
	cache cache.Cache
	opts  *options.Options
	log   logr.Logger
}

// gaugeInterval is how often the gauge is refreshed.
const gaugeInterval = 15 * time.Second

func (r *reporter) NeedLeaderElection() bool { return false }

func (r *reporter) Start(ctx context.Context) error {
	if !r.cache.WaitForCacheSync(ctx) {
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
	count := func(name string, list client.ObjectList) {
		if err := r.cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return
		}
		n := apimeta.LenList(list)
		metrics.Watched.WithLabelValues(name).Set(float64(n))
		kv = append(kv, strings.ToLower(name[:1])+name[1:]+"s", n) // e.g. configMaps
	}
	count("ConfigMap", &corev1.ConfigMapList{})
	count("Secret", &corev1.SecretList{})
	for _, k := range workload.Kinds {
		count(k.Name, k.NewList())
	}
	if print {
		r.log.Info("Watching", kv...)
	}
}
