package migrate

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/explain"
)

// TestCensus: the graphs under both settings make each workload's
// verdicts.
func TestCensus(t *testing.T) {
	dep := func(ns, name string, ann map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}}
	}
	objs := toObjects(
		dep("shop", "web", map[string]string{"reloader.stakater.com/auto": "true"}),
		dep("kube-system", "dns", map[string]string{"configmap.reloader.stakater.com/reload": "coredns"}),
		dep("shop", "plain", nil),
		dep("shop", "own", map[string]string{"watcher.dev/auto": "true"}),
	)
	counts := explain.Use{Kind: "ConfigMap", Name: "c", Verdict: "count", State: explain.StatePresent}
	withArgs := explain.Graph{Workloads: []explain.GraphWorkload{
		{Kind: "Deployment", Namespace: "shop", Name: "web", Uses: []explain.Use{counts}},
		{Kind: "Deployment", Namespace: "kube-system", Name: "dns", Uses: []explain.Use{counts}},
		{Kind: "Deployment", Namespace: "shop", Name: "plain", Uses: []explain.Use{{Kind: "ConfigMap", Name: "c", Verdict: "drop", Rule: "workload-not-opted-in"}}},
		{Kind: "Deployment", Namespace: "shop", Name: "own", Uses: []explain.Use{counts}},
	}}
	own := explain.Graph{Workloads: []explain.GraphWorkload{
		{Kind: "Deployment", Namespace: "shop", Name: "web", Uses: []explain.Use{counts}},
		{Kind: "Deployment", Namespace: "kube-system", Name: "dns", Uses: []explain.Use{{Kind: "ConfigMap", Name: "coredns", Verdict: "drop", Rule: "ignored-namespace"}}},
		{Kind: "Deployment", Namespace: "shop", Name: "plain", Uses: []explain.Use{counts}},
		{Kind: "Deployment", Namespace: "shop", Name: "own", Uses: []explain.Use{counts}},
	}}
	got := Census(objs, withArgs, own)
	want := []Workload{
		{Kind: "Deployment", Namespace: "kube-system", Name: "dns", OptsIn: true, Annotations: []string{"configmap.reloader.stakater.com/reload"},
			WithReloaderArgs: true, OwnValuesWhyNot: "ConfigMap coredns: rule ignored-namespace"},
		{Kind: "Deployment", Namespace: "shop", Name: "own", WithReloaderArgs: true, WithOwnValues: true},
		{Kind: "Deployment", Namespace: "shop", Name: "plain", WithOwnValues: true},
		{Kind: "Deployment", Namespace: "shop", Name: "web", OptsIn: true, Annotations: []string{"reloader.stakater.com/auto"}, WithReloaderArgs: true, WithOwnValues: true},
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Errorf("Census =\n%s\nwant\n%s", a, b)
	}
}

func toObjects(ds ...*appsv1.Deployment) []client.Object {
	out := make([]client.Object, len(ds))
	for i, d := range ds {
		out[i] = d
	}
	return out
}
