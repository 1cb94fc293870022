package app

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/snapshot"
)

// snapshots returns the snapshot maker of --pinning, nil without it.
func snapshots(o *options.Options, mgr manager.Manager, hasher *hash.Hasher) *snapshot.Maker {
	if !o.Pinning {
		return nil
	}
	return &snapshot.Maker{Client: mgr.GetClient(), Fresh: mgr.GetAPIReader(), Hasher: hasher, Policy: o.PinningPolicy,
		Budget: int64(o.PinningBudget) << 20, BudgetWindow: time.Hour}
}

// addOwners adds to mgr, with --pinning, what hands snapshots to the
// revisions that pin them (snapshot.Owners).
func addOwners(o *options.Options, mgr manager.Manager, log logr.Logger) error {
	if !o.Pinning {
		return nil
	}
	md, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	return mgr.Add(&snapshot.Owners{Client: mgr.GetClient(), Fresh: mgr.GetAPIReader(), Metadata: md, Namespaces: o.Namespaces, Log: log.WithName("snapshots"),
		Recorder: mgr.GetEventRecorder("watcher")})
}
