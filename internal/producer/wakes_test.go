package producer

import (
	"context"
	"errors"
	"slices"
	"testing"

	"k8s.io/client-go/util/workqueue"

	"github.com/watcher-dev/watcher/internal/object"
)

// addQueue records what is added to it.
type addQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	added *[]string
}

func (q addQueue) Add(item string) { *q.added = append(*q.added, item) }

// TestWakes: nothing is enqueued before the source starts; then the users
// of the source are, and none when they cannot be found.
func TestWakes(t *testing.T) {
	src := object.Ref{Kind: "Secret", Namespace: "shop", Name: "tls"}
	broken := object.Ref{Kind: "Secret", Namespace: "shop", Name: "broken"}
	w := Wakes[string]{Users: func(s object.Ref) ([]string, error) {
		if s == broken {
			return []string{"partial"}, errors.New("no index")
		}
		return []string{"Deployment shop/web", "StatefulSet shop/db"}, nil
	}}
	var added []string
	w.Enqueue(context.Background(), src) // not started: dropped
	if err := w.Start(context.Background(), addQueue{added: &added}); err != nil {
		t.Fatal(err)
	}
	w.Enqueue(context.Background(), broken)
	w.Enqueue(context.Background(), src)
	if want := []string{"Deployment shop/web", "StatefulSet shop/db"}; !slices.Equal(added, want) {
		t.Errorf("added %v, want %v", added, want)
	}
}
