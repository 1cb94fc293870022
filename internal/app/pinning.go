package app

import (
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/watcher-dev/watcher/internal/controller"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/snapshot"
)

// newPinning returns, with --pinning, the snapshot maker of the controller
// and what hands snapshots to the revisions that pin them (which also
// counts each namespace's bytes, for the maker's budget); nils without.
func newPinning(o *options.Options, mgr manager.Manager, hasher *hash.Hasher, log logr.Logger) (*snapshot.Maker, *snapshot.Owners, error) {
	if !o.Pinning {
		return nil, nil, nil
	}
	md, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, nil, fmt.Errorf("metadata client: %w", err)
	}
	owners := &snapshot.Owners{Client: mgr.GetClient(), Fresh: mgr.GetAPIReader(), Metadata: md, Namespaces: o.Namespaces,
		Log: log.WithName("snapshots"), Recorder: mgr.GetEventRecorder("watcher"), Sign: hasher.MAC, Grace: o.PinningGrace}
	maker := &snapshot.Maker{Client: mgr.GetClient(), Fresh: mgr.GetAPIReader(), Hasher: hasher, Policy: o.PinningPolicy,
		Budget: int64(o.PinningBudget) << 20, Stored: owners.Stored, Sign: hasher.MAC}
	return maker, owners, nil
}

// snapshotView is owners as the controller's view of every snapshot; nil
// (no view) without pinning.
func snapshotView(owners *snapshot.Owners) controller.SnapshotView {
	if owners == nil {
		return nil
	}
	return owners
}
