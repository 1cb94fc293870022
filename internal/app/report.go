package app

import (
	"context"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/settings"
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

// settingsPublisher publishes the installation's settings for the explain
// and graph commands (settings.Publish), on every replica: the replicas of
// one installation run with the same settings. An error (no rights, an API
// server away) is logged once and retried with backoff: the controller
// runs on regardless, and the commands then fall back to their flags.
type settingsPublisher struct {
	c         client.Client
	namespace string
	name      string
	settings  settings.Settings
	log       logr.Logger
}

func (p *settingsPublisher) NeedLeaderElection() bool { return false }

func (p *settingsPublisher) Start(ctx context.Context) error {
	wait := time.Second
	for failed := false; ; failed = true {
		err := settings.Publish(ctx, p.c, p.namespace, p.name, p.settings)
		switch {
		case err == nil:
			p.log.V(1).Info("Published the settings for explain and graph", "configMap", p.namespace+"/"+p.name)
			return nil
		case ctx.Err() != nil:
			return nil
		case apierrors.IsForbidden(err) && !failed:
			// An installation whose RBAC predates the settings (the
			// manifests of an older release): nothing is wrong with
			// watcher, and an upgrade of the RBAC is picked up here.
			p.log.Info("Settings not published: the installation's RBAC grants no write of this ConfigMap (the chart's and deploy/manifests' do); explain and graph use their flags", "configMap", p.namespace+"/"+p.name)
			wait = 5 * time.Minute
		case !failed:
			p.log.Error(err, "Cannot publish the settings for explain and graph; retrying (the commands use their flags meanwhile)", "configMap", p.namespace+"/"+p.name)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Minute)
	}
}
