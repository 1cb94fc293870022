package slim_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/metrics"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/slim"
	"github.com/watcher-dev/watcher/internal/workload"
)

func cmSel(name, key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}
}

// fullSpec uses ConfigMaps and Secrets in every way, next to everything
// else a pod spec may hold.
func fullSpec() corev1.PodSpec {
	return corev1.PodSpec{
		InitContainers: []corev1.Container{{
			Name: "init", Image: "init:1", Command: []string{"sh"},
			Env: []corev1.EnvVar{{Name: "I", ValueFrom: cmSel("init-cm", "k")}},
		}, {
			Name: "sidecar", Image: "sidecar:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sidecar-secret"}}}},
		}},
		Containers: []corev1.Container{{
			Name: "app", Image: "app:1", Args: []string{"--big"},
			Env: []corev1.EnvVar{
				{Name: "PLAIN", Value: "x"},
				{Name: "FIELD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "A", ValueFrom: cmSel("app-cm", "a")},
				{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app-secret"}, Key: "s"}}},
			},
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "all-cm"}}}},
			Ports:   []corev1.ContainerPort{{ContainerPort: 80}},
		}},
		Volumes: []corev1.Volume{
			{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}, Items: []corev1.KeyToPath{{Key: "f", Path: "f"}}}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-cm"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}},
			}}}},
			{Name: "token-only", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			}}}},
		},
		NodeSelector: map[string]string{"zone": "a"},
	}
}

func fullMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: "ns", Name: "web", UID: "u-1", ResourceVersion: "42", Generation: 3,
		Labels:          map[string]string{"app": "web"},
		Annotations:     map[string]string{"keep": "1", "drop": "2", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
	}
}

func TestWorkloadKeepsReferencesOnly(t *testing.T) {
	transform := slim.Workload(logr.Discard(), "keep", "absent")
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}}, Spec: fullSpec()}
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: fullMeta(), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Template: tmpl}, Status: appsv1.DeploymentStatus{Replicas: 3}},
		&appsv1.StatefulSet{ObjectMeta: fullMeta(), Spec: appsv1.StatefulSetSpec{ServiceName: "s", Template: tmpl}, Status: appsv1.StatefulSetStatus{Replicas: 3}},
		&appsv1.DaemonSet{ObjectMeta: fullMeta(), Spec: appsv1.DaemonSetSpec{Template: tmpl}, Status: appsv1.DaemonSetStatus{NumberReady: 3}},
	} {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			wantRefs, err := workload.Refs(obj)
			if err != nil || len(wantRefs) != 9 {
				t.Fatalf("the fixture should use 9 objects, uses %d (%v)", len(wantRefs), err)
			}
			kind, _ := workload.Of(obj)
			out, err := transform(obj)
			if err != nil {
				t.Fatal(err)
			}
			want := &metav1.PartialObjectMetadata{
				TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: kind.Name()},
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u-1", ResourceVersion: "42", Generation: 3,
					Annotations: map[string]string{slim.LabelsAnnotation: slim.EncodeLabels(map[string]string{"app": "web"}), "keep": "1", workload.RefsAnnotation: refs.Encode(wantRefs), restart.ContainersAnnotation: "app;init,sidecar",
						workload.TemplateAnnotation: workload.Template(obj)}},
			}
			if diff := cmp.Diff(want, out); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			gotRefs, err := workload.Refs(out.(client.Object))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantRefs, gotRefs); diff != "" {
				t.Errorf("references changed (-want +got):\n%s", diff)
			}
			again, err := transform(out)
			if err != nil || !cmp.Equal(out, again) {
				t.Errorf("not idempotent (%v):\n%s", err, cmp.Diff(out, again))
			}
		})
	}
	if got, err := transform(&corev1.Pod{}); err != nil || !cmp.Equal(got, &corev1.Pod{}) {
		t.Errorf("a Pod: %v, %v", got, err)
	}
}

func TestMeta(t *testing.T) {
	got := slim.Meta(fullMeta(), []string{"keep", "absent"})
	want := metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u-1", ResourceVersion: "42", Generation: 3,
		Annotations: map[string]string{slim.LabelsAnnotation: slim.EncodeLabels(map[string]string{"app": "web"}), "keep": "1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := slim.Meta(fullMeta(), nil); len(got.Annotations) != 1 {
		t.Errorf("annotations kept: %v", got.Annotations)
	}
}

// TestWorkloadOddReferences: names and keys the API server accepts but that
// mean something in the encoded references are kept exactly.
func TestWorkloadOddReferences(t *testing.T) {
	odd := []string{"x;y", "a:b", "a,b", "*", "%", "a/b", "!", "ünï"}
	var vols []corev1.Volume
	var items []corev1.KeyToPath
	for _, n := range odd {
		vols = append(vols, corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: n}}})
		items = append(items, corev1.KeyToPath{Key: n, Path: "p"})
	}
	vols = append(vols, corev1.Volume{Name: "items", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Items: items,
	}}})
	dep := &appsv1.Deployment{ObjectMeta: fullMeta(), Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: vols}}}}

	out, err := slim.Workload(logr.Discard())(dep)
	if err != nil {
		t.Fatal(err)
	}
	got, err := workload.Refs(out.(client.Object))
	if err != nil {
		t.Fatalf("references of the stored workload: %v", err)
	}
	if diff := cmp.Diff(refs.FromPodSpec(&dep.Spec.Template.Spec), got); diff != "" {
		t.Errorf("references changed on the way into the store (-want +got):\n%s", diff)
	}
	if len(got) != len(odd)+1 {
		t.Errorf("got %d references, want %d", len(got), len(odd)+1)
	}
}

// TestWorkloadUnreadableTemplate: a workload whose pod template cannot be
// read (here a kind added to workload.Kinds without a way to read its
// typed objects) is kept with no references, logged and counted,
// never an error: client-go would drop it and retry forever.
func TestWorkloadUnreadableTemplate(t *testing.T) {
	saved := workload.Kinds
	workload.Kinds = append(slices.Clone(saved), workload.Kind{GVK: appsv1.SchemeGroupVersion.WithKind("ReplicaSet")})
	t.Cleanup(func() { workload.Kinds = saved })
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	errors := metrics.Errors.WithLabelValues(slim.ErrorOperation)
	before := testutil.ToFloat64(errors)

	out, err := slim.Workload(log, "keep")(&appsv1.ReplicaSet{ObjectMeta: fullMeta()})
	if err != nil {
		t.Fatalf("the transform returned an error: %v", err)
	}
	want := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u-1", ResourceVersion: "42", Generation: 3,
			Annotations: map[string]string{slim.LabelsAnnotation: slim.EncodeLabels(map[string]string{"app": "web"}), "keep": "1", workload.RefsAnnotation: ""}},
	}
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(errors) - before; got != 1 {
		t.Errorf("errors counted: %v, want 1", got)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], `"workload"="ReplicaSet ns/web"`) {
		t.Errorf("logged %q, want one line naming the workload", logged)
	}
}

// TestWorkloadKeepsJobController: a Job keeps its controller reference
// alone (a CronJob's run is its CronJob's, workload.Kind.Controlled); a
// Deployment keeps none.
func TestWorkloadKeepsJobController(t *testing.T) {
	transform := slim.Workload(logr.Discard())
	owners := []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "u-2"},
		{APIVersion: "batch/v1", Kind: "CronJob", Name: "backup", UID: "u-3", Controller: ptr.To(true)},
	}
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "backup-1", OwnerReferences: owners}
	job, err := transform(&batchv1.Job{ObjectMeta: meta})
	if err != nil {
		t.Fatal(err)
	}
	if got := job.(client.Object).GetOwnerReferences(); !cmp.Equal(got, owners[1:]) || !workload.Job.Controlled(job.(client.Object)) {
		t.Errorf("Job owners %v, want the controller alone", got)
	}
	dep, err := transform(&appsv1.Deployment{ObjectMeta: meta})
	if err != nil {
		t.Fatal(err)
	}
	if got := dep.(client.Object).GetOwnerReferences(); got != nil {
		t.Errorf("Deployment owners %v, want none", got)
	}
	meta.OwnerReferences = owners[:1]
	if job, _ := transform(&batchv1.Job{ObjectMeta: meta}); workload.Job.Controlled(job.(client.Object)) {
		t.Error("a Job with an owner that is not its controller is controlled")
	}
}
