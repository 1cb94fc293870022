package app

import (
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watcher-dev/watcher/internal/controller"
)

// helpers are the runnables beside the controller, made by controller.New
// (h): the guards' sweeper, the locks kept for held changes and the
// lister of Job re-creations (on the leader only when leader), those that
// are on.
func helpers(h controller.Helpers, leader bool, log logr.Logger) []manager.Runnable {
	rs := []manager.Runnable{h.Guards.Sweeper(log.WithName("guards"))}
	if h.Pending != nil {
		rs = append(rs, h.Pending)
	}
	if h.Recreations != nil {
		rs = append(rs, h.Recreations.Lister(leader))
	}
	return rs
}
