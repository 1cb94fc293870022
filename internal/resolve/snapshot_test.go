package resolve_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/pin"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/slim"
)

// snap is the snapshot app-config-pin-0123456789abcdef0123 of app-config,
// labelled as pin.Snapshot labels it.
const snap = "app-config-pin-0123456789abcdef0123"

// labelled returns the object of kind ns/name with labels, as read from
// the API server.
func labelled(kind refs.Kind, ns, name string, labels map[string]string) *metav1.PartialObjectMetadata {
	o := stored(kind, ns, name)
	o.Labels = labels
	return o
}

// encoded returns the object of kind ns/name with labels as the store
// keeps them (slim.LabelsAnnotation).
func encoded(kind refs.Kind, ns, name string, labels map[string]string) *metav1.PartialObjectMetadata {
	o := stored(kind, ns, name)
	o.Annotations = map[string]string{slim.LabelsAnnotation: slim.EncodeLabels(labels)}
	return o
}

// everything is a Matcher that accepts every ConfigMap of the namespace,
// as a policy's empty label selector does.
type everything struct{}

func (everything) Name() string                           { return "everything" }
func (everything) Refs(client.Object) ([]refs.Ref, error) { return nil, nil }
func (everything) Matches(client.Object) []resolve.Match {
	return []resolve.Match{{Kind: refs.ConfigMap, Accepts: func(metav1.Object) bool { return true }, Ref: refs.Ref{AllKeys: true}}}
}

// TestSnapshotsNeverMatched: a snapshot (labelled pin.SnapshotLabel) is
// never a source of a match, whatever the pattern or selector, as read from
// the API server or as the store keeps it; a reference naming it, in the
// pod spec or in a reload list, stays; the label alone decides, not the
// name's shape. Explain says what Resolve does.
func TestSnapshotsNeverMatched(t *testing.T) {
	isSnap := map[string]string{pin.SnapshotLabel: "true"}
	tests := []struct {
		name    string
		configs configs
		sources []resolve.Source
		ann     map[string]string
		podSpec string // a ConfigMap the pod spec names; "" none
		want    []string
	}{
		{"a pattern leaves the snapshot out",
			configs{stored(refs.ConfigMap, "shop", "app-config"), labelled(refs.ConfigMap, "shop", snap, isSnap)},
			nil, map[string]string{optin.ConfigMapReload: "app-.*"}, "", []string{"app-config"}},
		{"as the store keeps it (labels encoded)",
			configs{stored(refs.ConfigMap, "shop", "app-config"), encoded(refs.ConfigMap, "shop", snap, map[string]string{"team": "a", pin.SnapshotLabel: "true"})},
			nil, map[string]string{optin.ConfigMapReload: "app-.*"}, "", []string{"app-config"}},
		{"a pattern that matches only the snapshot finds nothing",
			configs{stored(refs.ConfigMap, "shop", "app-config"), labelled(refs.ConfigMap, "shop", snap, isSnap)},
			nil, map[string]string{optin.ConfigMapReload: ".*-pin-.*"}, "", nil},
		{"a name with a dot (a pattern too) leaves it out",
			configs{stored(refs.ConfigMap, "shop", "app.config"), labelled(refs.ConfigMap, "shop", "app.config-pin-0123456789abcdef0123", isSnap)},
			nil, map[string]string{optin.ConfigMapReload: "app.config.*"}, "", []string{"app.config"}},
		{"Secrets too",
			configs{stored(refs.Secret, "shop", "app-tls"), labelled(refs.Secret, "shop", "app-tls-pin-0123456789abcdef0123", isSnap)},
			nil, map[string]string{optin.SecretReload: "app-.*"}, "", []string{"app-tls"}},
		{"any Matcher (a policy's selector)",
			configs{stored(refs.ConfigMap, "shop", "app-config"), labelled(refs.ConfigMap, "shop", snap, isSnap)},
			[]resolve.Source{everything{}}, nil, "", []string{"app-config"}},
		{"the label alone: any name",
			configs{stored(refs.ConfigMap, "shop", "app-config"), labelled(refs.ConfigMap, "shop", "app-mine", isSnap)},
			nil, map[string]string{optin.ConfigMapReload: "app-.*"}, "", []string{"app-config"}},
		{"the name's shape alone is no snapshot",
			configs{stored(refs.ConfigMap, "shop", "app-config"), stored(refs.ConfigMap, "shop", snap)},
			nil, map[string]string{optin.ConfigMapReload: "app-.*"}, "", []string{"app-config", snap}},
		{"a label other than \"true\" is no snapshot",
			configs{stored(refs.ConfigMap, "shop", "app-config"), labelled(refs.ConfigMap, "shop", snap, map[string]string{pin.SnapshotLabel: "false"})},
			nil, map[string]string{optin.ConfigMapReload: "app-.*"}, "", []string{"app-config", snap}},
		{"the pod spec naming a snapshot keeps it",
			configs{stored(refs.ConfigMap, "shop", "app-config"), labelled(refs.ConfigMap, "shop", snap, isSnap)},
			nil, map[string]string{optin.ConfigMapReload: "app-.*"}, snap, []string{"app-config", snap}},
		{"a reload list naming a snapshot keeps it",
			configs{stored(refs.ConfigMap, "shop", "app-config"), labelled(refs.ConfigMap, "shop", snap, isSnap)},
			nil, map[string]string{optin.ConfigMapReload: snap}, "", []string{snap}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := resolve.New(resolve.Options{Sources: append([]resolve.Source{resolve.PodSpec{}, resolve.Annotations{}}, tt.sources...)})
			d := deployment("shop")
			d.Annotations = tt.ann
			d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
			if tt.podSpec != "" {
				d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: tt.podSpec}}}}
			}
			uses, err := r.Resolve(d, tt.configs)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range uses {
				got = append(got, u.Name)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
			origins, err := r.Explain(d, tt.configs)
			if err != nil {
				t.Fatal(err)
			}
			var explained []string
			for _, o := range origins {
				explained = append(explained, o.Ref.Name)
			}
			slices.Sort(explained)
			if diff := cmp.Diff(tt.want, explained); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
		})
	}
}
