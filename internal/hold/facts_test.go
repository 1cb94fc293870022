package hold

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/object"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/verdict"
)

// admit is Admit with the facts of p's sources read from g's store, as the
// controller gathers them (the guards read none themselves).
func admit(g *Guards, ctx context.Context, key object.Ref, obj client.Object, p plan.Plan, report func(error)) (guard.Request, bool) {
	facts := map[string]verdict.Source{}
	if g != nil && g.store != nil {
		for _, src := range sourcesOf(key, p) {
			o, err := g.store.Get(src.Kind, src.Namespace, src.Name)
			if err != nil || o == nil {
				continue
			}
			s := verdict.Source{Present: true, Version: o.GetResourceVersion(), ChangeSet: optin.ChangeSetOf(o.GetAnnotations()),
				Release: o.GetAnnotations()[guard.ReleaseAnnotation]}
			if d, err := hash.FromObject(o); err == nil {
				s.Sum = d.Sum
			}
			facts[src.Kind+"/"+src.Name] = s
		}
	}
	return g.Admit(ctx, key, obj, p, Facts{Sources: facts}, report)
}
