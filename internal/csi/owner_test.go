package csi

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metafake "k8s.io/client-go/metadata/fake"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/object"
)

func meta(apiVersion, kind, name string, uid types.UID, owner *metav1.OwnerReference) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: uid},
	}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return m
}

func controlledBy(apiVersion, kind, name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: "u-" + types.UID(name), Controller: ptr.To(true)}
}

func TestOwners(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = metav1.AddMetaToScheme(scheme)
	client := metafake.NewSimpleMetadataClient(scheme,
		meta("apps/v1", "ReplicaSet", "web-5d8f", "rs1", controlledBy("apps/v1", "Deployment", "web")),
		meta("apps/v1", "ReplicaSet", "bare", "rs2", nil),
		meta("v1", "Pod", "web-5d8f-1", "p1", controlledBy("apps/v1", "ReplicaSet", "web-5d8f")),
		meta("v1", "Pod", "db-0", "p2", controlledBy("apps/v1", "StatefulSet", "db")),
		meta("v1", "Pod", "agent-x", "p3", controlledBy("apps/v1", "DaemonSet", "agent")),
		meta("v1", "Pod", "lone", "p4", nil),
		meta("v1", "Pod", "bare-1", "p5", controlledBy("apps/v1", "ReplicaSet", "bare")),
		meta("v1", "Pod", "widget-1", "p6", controlledBy("example.com/v1", "Widget", "w")),
	)
	o := NewOwners(client)
	tests := []struct {
		pod, uid string
		want     object.Ref
		ok       bool
	}{
		{"web-5d8f-1", "p1", object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}, true},
		{"db-0", "p2", object.Ref{Kind: "StatefulSet", Namespace: "shop", Name: "db"}, true},
		{"agent-x", "p3", object.Ref{Kind: "DaemonSet", Namespace: "shop", Name: "agent"}, true},
		{"lone", "p4", object.Ref{}, false},
		{"bare-1", "p5", object.Ref{}, false},
		{"widget-1", "p6", object.Ref{}, false},
		{"gone", "p7", object.Ref{}, false},
		{"web-5d8f-1", "another-uid", object.Ref{}, false}, // the status's pod was replaced
	}
	for _, tt := range tests {
		got, ok, err := o.Of(context.Background(), "shop", tt.pod, tt.uid)
		if err != nil || got != tt.want || ok != tt.ok {
			t.Errorf("%s: %v %t %v, want %v %t", tt.pod, got, ok, err, tt.want, tt.ok)
		}
	}
	before := len(client.Actions())
	if _, ok, _ := o.Of(context.Background(), "shop", "web-5d8f-1", "p1"); !ok || len(client.Actions()) != before {
		t.Errorf("a pod asked again is read again (%d reads)", len(client.Actions())-before)
	}
}
