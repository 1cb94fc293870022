package integration

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/test/observe"
)

// track creates w and counts its rollouts until the test ends.
func track(t *testing.T, w client.Object) *observe.Tracker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr, err := observe.Track(ctx, restConfig, w)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
