package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/migrate"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/settings"
)

// deployments lists the Deployments of namespace ("" for all).
func (r *reader) deployments(ctx context.Context, namespace string) ([]appsv1.Deployment, error) {
	var list appsv1.DeploymentList
	if err := r.c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list deployments: %w", err)
	}
	return list.Items, nil
}

// neighbours lists the names of the ServiceAccounts and ConfigMaps of
// namespace (metadata only), where the image swap would grant watcher's
// rights on its own state; Unread says why not, when they cannot be
// listed.
func (r *reader) neighbours(ctx context.Context, namespace string) *migrate.Neighbours {
	n := &migrate.Neighbours{}
	for _, kind := range []string{"ServiceAccount", "ConfigMap"} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind + "List"))
		if err := r.c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return &migrate.Neighbours{Unread: fmt.Sprintf("list %ss of %s: %v", strings.ToLower(kind), namespace, err)}
		}
		for _, item := range list.Items {
			if kind == "ServiceAccount" {
				n.ServiceAccounts = append(n.ServiceAccounts, item.Name)
			} else {
				n.ConfigMaps = append(n.ConfigMaps, item.Name)
			}
		}
	}
	return n
}

// restartEvents lists the Events of namespace ("" for all) that say a
// workload was, or would have been, restarted: watcher's WouldRestart and
// Reloader's Reloaded.
func (r *reader) restartEvents(ctx context.Context, namespace string) ([]migrate.Event, error) {
	var out []migrate.Event
	for _, reason := range []string{cause.ReasonWouldRestart, migrate.ReasonReloaded} {
		var list eventsv1.EventList
		if err := r.c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{"reason": reason}); err != nil {
			return nil, fmt.Errorf("list %s events: %w", reason, err)
		}
		for _, e := range list.Items {
			out = append(out, eventOf(&e))
		}
	}
	return out, nil
}

// eventOf reads an Event, written through events.k8s.io (watcher) or the
// core API (Reloader).
func eventOf(e *eventsv1.Event) migrate.Event {
	ev := migrate.Event{Kind: e.Regarding.Kind, Namespace: e.Regarding.Namespace, Name: e.Regarding.Name, Reason: e.Reason, Note: e.Note, Count: 1}
	if ev.Namespace == "" {
		ev.Namespace = e.Namespace
	}
	for _, t := range []time.Time{e.CreationTimestamp.Time, e.EventTime.Time, e.DeprecatedLastTimestamp.Time} {
		if t.After(ev.Time) {
			ev.Time = t
		}
	}
	if e.DeprecatedCount > 1 {
		ev.Count = int(e.DeprecatedCount)
	}
	if e.Series != nil {
		ev.Count = int(e.Series.Count)
		if e.Series.LastObservedTime.After(ev.Time) {
			ev.Time = e.Series.LastObservedTime.Time
		}
	}
	return ev
}

// census draws the graphs of the cluster's workloads under the settings
// of a Reloader's arguments and under watcher's defaults, reading the
// metadata of every ConfigMap and Secret once.
type census struct {
	ctx     context.Context
	r       *reader
	configs map[string]*packed.Object
	lister  *lister
	labels  *namespaceLabels
}

// workloads returns the census of objs for the Reloader read as o.
func (c *census) workloads(o *options.Options, objs []client.Object) ([]migrate.Workload, error) {
	if err := c.readConfigs(); err != nil {
		return nil, err
	}
	renamed := objs
	if len(o.AnnotationKeys) > 0 {
		renamed = make([]client.Object, len(objs))
		for i, obj := range objs {
			cp := obj.DeepCopyObject().(client.Object)
			o.AnnotationKeys.Rename(cp)
			renamed[i] = cp
		}
	}
	withArgs, err := c.graph(o.Settings, renamed)
	if err != nil {
		return nil, err
	}
	own, err := c.graph(options.Defaults().Settings, objs)
	if err != nil {
		return nil, err
	}
	return migrate.Census(renamed, withArgs, own), nil
}

// graph draws the graph of objs under s.
func (c *census) graph(s settings.Settings, objs []client.Object) (explain.Graph, error) {
	es, err := explainSettings(s, nil)
	if err != nil {
		return explain.Graph{}, err
	}
	es.Configs = c.lister
	es.NamespaceLabels = c.labels.get
	return explain.BuildGraph(es, objs, func(kind refs.Kind, namespace, name string) explain.Config {
		cfg := explain.Config{Kind: kind, Namespace: namespace, Name: name}
		if obj, ok := c.configs[string(kind)+"/"+namespace+"/"+name]; ok {
			cfg.Found, cfg.Labels = true, obj.GetLabels()
			cfg.Annotations = s.AnnotationKeys.Annotations(obj.GetAnnotations())
		}
		return cfg
	}), nil
}

// readConfigs lists the metadata of every ConfigMap and Secret, once, and
// serves the lists to the resolver (reload-list patterns) too.
func (c *census) readConfigs() error {
	if c.configs != nil {
		return nil
	}
	c.configs = map[string]*packed.Object{}
	for _, kind := range []refs.Kind{refs.ConfigMap, refs.Secret} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(kind) + "List"))
		if err := c.r.c.List(c.ctx, list); err != nil {
			return fmt.Errorf("list %ss (metadata): %w", kind, err)
		}
		for i := range list.Items {
			list.Items[i].Kind = string(kind)
			obj := packed.Pack(&list.Items[i])
			c.configs[string(kind)+"/"+obj.GetNamespace()+"/"+obj.GetName()] = obj
			id := string(kind) + "/" + obj.GetNamespace()
			c.lister.lists[id] = append(c.lister.lists[id], obj)
		}
	}
	return nil
}
