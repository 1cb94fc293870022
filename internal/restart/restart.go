// Package restart writes restarts. A restart changes a workload's pod
// template so that the workload's controller rolls its pods, or (evict)
// leaves it alone and has the pods evicted; how is a Strategy, chosen for
// all workloads by --restart-strategy and for one workload by its
// annotation StrategyAnnotation (see For):
//
//	strategy    what the restart sets on the pod template          patch type
//	annotation  annotation watcher.dev/restarted-for = restart ID  JSON merge patch
//	env         env var WATCHER_CONFIG_HASH = restart ID on every  strategic merge patch
//	            container and init container (native sidecars
//	            are init containers)
//	restarted-  annotation kubectl.kubernetes.io/restartedAt =      JSON merge patch
//	at          the time of the restart, RFC 3339 (what kubectl
//	            rollout restart writes), its fraction of a
//	            second from the restart ID
//	evict       nothing: the pods are evicted afterwards (see       JSON merge patch
//	            Evict); an Argo Rollout's spec.restartAt
//
// For annotation and env the value is the record's restart ID
// (plan.Record.RestartID), derived from the recorded hashes alone: the same
// configuration always yields the same template. For restarted-at it is a
// time, but whether to write at all is decided by the hashes for every
// strategy (plan.Decide), so none rolls the pods twice for one
// configuration.
//
// A strategy returns only the pod template's part of a patch; PatchFor
// adds the record annotations and the resourceVersion precondition, and
// the caller sends the whole as one patch of the type the strategy asks
// for, with PatchOptions. A Job's
// pod template cannot be changed: the same patch is applied to a copy of
// the Job, which replaces it (RecreatedJob), whatever the strategy.
package restart

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// StrategyAnnotation, on a workload, names the strategy that restarts it,
// in place of --restart-strategy.
const StrategyAnnotation = "watcher.dev/restart-strategy"

// Strategy is one way of writing a restart.
type Strategy interface {
	// Name is the strategy's name in --restart-strategy and in
	// StrategyAnnotation.
	Name() string
	// Template returns the change of w's pod template that restarts w: the
	// part of the patch found at w.Kind.Template, and the type of patch
	// that carries it.
	Template(w Workload) (types.PatchType, map[string]any)
}

// Workload is what a strategy reads of the workload it restarts.
type Workload struct {
	Kind workload.Kind
	// Object is the workload: a typed or unstructured object from the API
	// server, or a metadata-only one from watcher's store.
	Object client.Object
	// ID is the restart ID: the value the strategy writes.
	ID string
}

// Strategies are the strategies watcher knows, the default first.
var Strategies = []Strategy{Annotation{}, Env{}, RestartedAt{}, Evict{}}

// Default is the strategy used when none is chosen.
var Default Strategy = Annotation{}

// ByName returns the strategy called name.
func ByName(name string) (Strategy, bool) {
	for _, s := range Strategies {
		if s.Name() == name {
			return s, true
		}
	}
	return nil, false
}

// Names returns the names of the strategies.
func Names() []string {
	out := make([]string, len(Strategies))
	for i, s := range Strategies {
		out[i] = s.Name()
	}
	return out
}

// For returns the strategy of obj, a workload:
//
//	StrategyAnnotation on obj            strategy
//	absent                               def; on an Argo Rollout with
//	                                     Reloader's optin.RolloutStrategy
//	                                     "restart", Evict (spec.restartAt)
//	the name of a strategy (any case)    that strategy
//	anything else                        def, and an error to report
//
// A nil def is Default. A value that names no strategy never stops a
// restart. The error does not quote the value.
func For(obj client.Object, def Strategy) (Strategy, error) {
	if def == nil {
		def = Default
	}
	v, ok := obj.GetAnnotations()[StrategyAnnotation]
	if !ok {
		if strings.TrimSpace(obj.GetAnnotations()[optin.RolloutStrategy]) == "restart" && isRollout(obj) {
			return Evict{}, nil // Reloader's restart of a Rollout: spec.restartAt
		}
		return def, nil
	}
	if s, ok := ByName(strings.ToLower(strings.TrimSpace(v))); ok {
		return s, nil
	}
	return def, fmt.Errorf("annotation %s names no restart strategy (want one of %s); using %s",
		StrategyAnnotation, strings.Join(Names(), ", "), def.Name())
}

// Patch returns the part of a workload's patch that restarts it with s:
// the strategy's template change placed at the kind's template path, or
// its change of the spec (Evict, for an Argo Rollout), so that its one key
// is "spec" for every kind; and the patch type.
func Patch(s Strategy, w Workload) (types.PatchType, map[string]any) {
	if sp, ok := s.(specStrategy); ok {
		if pt, spec, ok := sp.Spec(w); ok {
			return pt, map[string]any{"spec": spec}
		}
	}
	pt, at := s.Template(w)
	path := w.Kind.Template
	for i := len(path) - 1; i > 0; i-- {
		at = map[string]any{path[i]: at}
	}
	if len(path) == 0 { // a kind always says where its template is
		return pt, at
	}
	return pt, map[string]any{path[0]: at}
}

// Annotation restarts by setting plan.RestartAnnotation on the pod
// template, with a JSON merge patch. Every kind the API server serves takes
// a merge patch, custom resources included.
type Annotation struct{}

// Name implements Strategy.
func (Annotation) Name() string { return "annotation" }

// Template implements Strategy.
func (Annotation) Template(w Workload) (types.PatchType, map[string]any) {
	return types.MergePatchType, map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{plan.RestartAnnotation: w.ID},
	}}
}

// isRollout tells whether obj is an Argo Rollout.
func isRollout(obj client.Object) bool {
	k, ok := workload.Of(obj)
	return ok && k.Name() == workload.Rollout.Name() && k.GVK.Group == workload.Rollout.GVK.Group
}
