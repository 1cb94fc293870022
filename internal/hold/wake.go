package hold

import (
	"context"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/object"
)

// wakeAt decides key again at t.
func (g *Guards) wakeAt(ctx context.Context, key object.Ref, t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.timers[key]; old != nil {
		old.Stop()
	}
	base := g.ctx
	if base == nil {
		base = ctx
	}
	g.timers[key] = time.AfterFunc(max(t.Sub(g.now()), 0)+10*time.Millisecond, func() {
		g.mu.Lock()
		delete(g.timers, key)
		g.mu.Unlock()
		g.wakeNow(base, key)
	})
}

// wakeNow decides key again as soon as a worker is free.
func (g *Guards) wakeNow(ctx context.Context, key object.Ref) {
	e := event.TypedGenericEvent[object.Ref]{Object: key}
	select {
	case g.wake <- e:
	default:
		go func() {
			select {
			case g.wake <- e:
			case <-ctx.Done():
			}
		}()
	}
}

// wakeHeld decides again every workload held for one of reasons.
func (g *Guards) wakeHeld(ctx context.Context, reasons ...guard.Reason) {
	g.wakeIf(ctx, func(_ object.Ref, h hold) bool { return slices.Contains(reasons, h.reason) })
}

// wakeFor decides again the workloads held for one of reasons whose
// held restart is for a change of one of ids: a release or a new content
// of an object can end only those holds.
func (g *Guards) wakeFor(ctx context.Context, ids []object.Ref, reasons ...guard.Reason) {
	g.wakeIf(ctx, func(_ object.Ref, h hold) bool {
		return slices.Contains(reasons, h.reason) && slices.ContainsFunc(h.sources, func(s object.Ref) bool { return slices.Contains(ids, s) })
	})
}

// wakeIf decides again the held workloads that match.
func (g *Guards) wakeIf(ctx context.Context, match func(object.Ref, hold) bool) {
	g.mu.Lock()
	var keys []object.Ref
	for k, h := range g.held {
		if match(k, h) {
			keys = append(keys, k)
		}
	}
	g.mu.Unlock()
	for _, k := range keys {
		g.wakeNow(ctx, k)
	}
}

// Wakes returns the workloads to decide again: their hold can end.
func (g *Guards) Wakes() <-chan event.TypedGenericEvent[object.Ref] {
	if g == nil {
		return nil
	}
	return g.wake
}
