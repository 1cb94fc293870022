package app

import (
	"cmp"
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watcher-dev/watcher/internal/alert"
	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/hold"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/internal/sealed"
	"github.com/watcher-dev/watcher/internal/store"
)

// newAlerts returns the alert sender the options ask for, nil if no alert
// is switched on, and the runnables to add to the manager: the sender and,
// with --alert-webhook-url-secret, the watch of the URL's Secret.
func newAlerts(cfg *rest.Config, o *options.Options, log logr.Logger) (alert.Notifier, []manager.Runnable, error) {
	a := o.Alert
	if !a.Any() {
		return nil, nil, nil
	}
	var on []string
	for i, b := range []bool{a.OnReload, a.OnHeld, a.OnFlapping, a.OnFailedRollout} {
		if b {
			on = append(on, alert.Events[i])
		}
	}
	log = log.WithName("alerts")
	s, err := alert.NewSender(alert.Config{
		Sink: a.Sink, URL: a.WebhookURL, Proxy: a.WebhookProxy, AdditionalInfo: a.AdditionalInfo, On: on, Log: log,
	})
	if err != nil {
		return nil, nil, err
	}
	run := []manager.Runnable{s}
	if a.WebhookURLSecret != "" {
		ref, err := alert.ParseSecretRef(a.WebhookURLSecret)
		if err != nil {
			return nil, nil, fmt.Errorf("invalid --alert-webhook-url-secret: %w", err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("create client: %w", err)
		}
		run = append(run, &alert.URLFromSecret{Client: cs, Ref: ref, Sender: s, Log: log})
	}
	log.Info("Alerts on", "sink", a.Sink, "events", on)
	return s, run, nil
}

// sealedOptions are the settings of the watch of SealedSecrets: the
// namespaces and ignored namespaces of Secrets.
func sealedOptions(cfg *rest.Config, o *options.Options, h *hash.Hasher) (*sealed.Options, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return &sealed.Options{Dynamic: dyn, Namespaces: o.Namespaces, IgnoreNamespaces: o.IgnoreSecretNamespaces, Hasher: h}, nil
}

// producers returns the follower of the producers of Secrets (package
// producer), telling the controller that *r will be of their progress;
// the controller owners of sources (custom resources reporting kstatus
// status) are read through mapper when asked.
func producers(dyn dynamic.Interface, mapper meta.RESTMapper, st *store.Store, o *options.Options, r **controller.Reconciler, log logr.Logger) *producer.Follower {
	return producer.New(producer.Options{Dynamic: dyn, Namespaces: o.Namespaces, IgnoreNamespaces: o.IgnoreSecretNamespaces, Log: log,
		Owners: &producer.Owners{Owner: st.ControllerOf, Mapper: mapper, Dynamic: dyn},
		Enqueue: func(ctx context.Context, src object.Ref) {
			if rc := *r; rc != nil {
				rc.Produced(ctx, src)
			}
		}})
}

// guardAlerts passes the restart guards' holds, flapping sources and failed
// rollouts on to the alert sender (which sends those switched on).
type guardAlerts struct{ n alert.Notifier }

// Notify implements guard.Notifier.
func (g guardAlerts) Notify(e guard.Event) {
	if a, ok := alert.FromGuard(string(e.Type), e.Workload, e.Source, string(e.Reason), e.Message); ok {
		g.n.Notify(a)
	}
}

// withAlerts returns gc telling n of the guards' events, when n is set.
func withAlerts(gc hold.Config, n alert.Notifier) hold.Config {
	if n != nil {
		gc.Notifier = guardAlerts{n}
	}
	return gc
}

// guardConfig reads the guards' settings from the options.
func guardConfig(o *options.Options) hold.Config {
	return hold.Config{
		Budget: o.RestartBudget.Count, BudgetWindow: o.RestartBudget.Per,
		FlapThreshold: o.FlapThreshold.Count, FlapWindow: o.FlapThreshold.Per, FlapQuiet: o.FlapQuiet,
		MaxConcurrent:       o.MaxConcurrentRollouts,
		RolloutTimeout:      o.RolloutTimeout,
		HoldOnFailure:       o.OnFailedRollout == options.OnFailedHold,
		Shared:              o.Lock != options.LockLease,
		Settle:              cmp.Or(o.Settle, o.Coalesce),
		SettleMax:           o.SettleMax,
		ProducerTimeout:     o.ProducerTimeout,
		ProducerTimeoutHold: o.OnProducerTimeout == options.OnFailedHold,
	}
}
