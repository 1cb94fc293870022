package workload_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/workload"
)

// TestOnDelete: one case per row of OnDelete's table.
func TestOnDelete(t *testing.T) {
	sts := func(replicas *int32, s appsv1.StatefulSetUpdateStrategy) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: replicas, UpdateStrategy: s}}
	}
	partition := func(p int32) appsv1.StatefulSetUpdateStrategy {
		return appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(p)}}
	}
	tests := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"StatefulSet OnDelete", sts(nil, appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}), "OnDelete"},
		{"StatefulSet partition = replicas", sts(ptr.To[int32](3), partition(3)), "partition"},
		{"StatefulSet partition over the default one replica", sts(nil, partition(1)), "partition"},
		{"StatefulSet partition below replicas: some pods roll", sts(ptr.To[int32](3), partition(2)), ""},
		{"StatefulSet rolling update", sts(nil, appsv1.StatefulSetUpdateStrategy{}), ""},
		{"DaemonSet OnDelete", &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}, "OnDelete"},
		{"DaemonSet rolling update", &appsv1.DaemonSet{}, ""},
		{"Deployment", &appsv1.Deployment{}, ""},
		{"CronJob: the next Job runs the new template", &batchv1.CronJob{}, ""},
		{"stored workload", &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{workload.OnDeleteAnnotation: "OnDelete"}}}, "OnDelete"},
	}
	for _, tt := range tests {
		if got := workload.OnDelete(tt.obj); got != tt.want {
			t.Errorf("%s: OnDelete() = %q, want %q", tt.name, got, tt.want)
		}
	}
}
