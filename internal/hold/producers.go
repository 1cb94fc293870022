package hold

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/guard"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
)

// ReasonProducerFailed is the Event reason of a producer that reports an
// error for a source the restart does not change: the restart does not
// wait for it (guard.Producing.Ignored).
const ReasonProducerFailed = "ProducerFailed"

// unwaited warns on obj, the workload key, of the failed producers of
// the sources its restart req does not change: once per producer and
// source while the restart is pending (the memory ends with the restart,
// or when none is needed: unhold). It names the producer and the source,
// and the producer's evidence, never a value.
func (g *Guards) unwaited(key object.Ref, obj client.Object, req guard.Request) {
	ignored := g.producing.Ignored(req)
	if len(ignored) == 0 {
		return
	}
	var fresh []guard.Producer
	g.mu.Lock()
	for _, pr := range ignored {
		cause := pr.Object.String() + " " + pr.Source.String()
		if !slices.Contains(g.warned[key], cause) {
			g.warned[key] = append(g.warned[key], cause)
			fresh = append(fresh, pr)
		}
	}
	g.mu.Unlock()
	for _, pr := range fresh {
		g.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonProducerFailed, "Restart", "%s",
			note.Truncate(fmt.Sprintf("%s %s, which writes %s %s, reports an error: %s; not waited for: %s %s did not change, the restart reads it as it is",
				pr.Object.Kind, pr.Object.Name, pr.Source.Kind, pr.Source.Name, pr.Message, pr.Source.Kind, pr.Source.Name)))
	}
}
