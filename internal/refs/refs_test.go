package refs_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/internal/refs"
)

func envCM(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: "E", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key,
	}}}
}

func envSecret(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: "E", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key,
	}}}
}

func fromCM(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

func fromSecret(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

// items returns the KeyToPath list for keys; nil (all keys) when there are none.
func items(keys ...string) []corev1.KeyToPath {
	var out []corev1.KeyToPath
	for _, k := range keys {
		out = append(out, corev1.KeyToPath{Key: k, Path: "p/" + k})
	}
	return out
}

func volCM(name string, keys ...string) corev1.Volume {
	return corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Items: items(keys...),
	}}}
}

func volSecret(name string, keys ...string) corev1.Volume {
	return corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: name, Items: items(keys...),
	}}}
}

func projCM(name string, keys ...string) corev1.VolumeProjection {
	return corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Items: items(keys...),
	}}
}

func projSecret(name string, keys ...string) corev1.VolumeProjection {
	return corev1.VolumeProjection{Secret: &corev1.SecretProjection{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Items: items(keys...),
	}}
}

func projected(sources ...corev1.VolumeProjection) corev1.Volume {
	return corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}}}
}

func env(e ...corev1.EnvVar) corev1.Container { return corev1.Container{Name: "c", Env: e} }

func envFrom(e ...corev1.EnvFromSource) corev1.Container {
	return corev1.Container{Name: "c", EnvFrom: e}
}

func containers(c ...corev1.Container) *corev1.PodSpec { return &corev1.PodSpec{Containers: c} }

func volumes(v ...corev1.Volume) *corev1.PodSpec { return &corev1.PodSpec{Volumes: v} }

func cm(name string, keys ...string) refs.Ref {
	return refs.Ref{Kind: refs.ConfigMap, Name: name, Keys: keys}
}

func cmAll(name string) refs.Ref { return refs.Ref{Kind: refs.ConfigMap, Name: name, AllKeys: true} }

func sec(name string, keys ...string) refs.Ref {
	return refs.Ref{Kind: refs.Secret, Name: name, Keys: keys}
}

func secAll(name string) refs.Ref { return refs.Ref{Kind: refs.Secret, Name: name, AllKeys: true} }

func TestFromPodSpec(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	tests := []struct {
		name string
		spec *corev1.PodSpec
		want []refs.Ref
	}{
		// One case per row of the package comment's table.
		{"env configMapKeyRef", containers(env(envCM("a", "k"))), []refs.Ref{cm("a", "k")}},
		{"env secretKeyRef", containers(env(envSecret("a", "k"))), []refs.Ref{sec("a", "k")}},
		{"envFrom configMapRef", containers(envFrom(fromCM("a"))), []refs.Ref{cmAll("a")}},
		{"envFrom secretRef", containers(envFrom(fromSecret("a"))), []refs.Ref{secAll("a")}},
		{"volume configMap, all keys", volumes(volCM("a")), []refs.Ref{cmAll("a")}},
		{"volume configMap, items", volumes(volCM("a", "y", "x")), []refs.Ref{cm("a", "x", "y")}},
		{
			"volume configMap, empty items list means all keys",
			volumes(corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Items: []corev1.KeyToPath{},
			}}}),
			[]refs.Ref{cmAll("a")},
		},
		{"volume secret, all keys", volumes(volSecret("a")), []refs.Ref{secAll("a")}},
		{"volume secret, items", volumes(volSecret("a", "tls.key", "tls.crt")), []refs.Ref{sec("a", "tls.crt", "tls.key")}},
		{"projected configMap, all keys", volumes(projected(projCM("a"))), []refs.Ref{cmAll("a")}},
		{"projected configMap, items", volumes(projected(projCM("a", "k"))), []refs.Ref{cm("a", "k")}},
		{"projected secret, all keys", volumes(projected(projSecret("a"))), []refs.Ref{secAll("a")}},
		{"projected secret, items", volumes(projected(projSecret("a", "k"))), []refs.Ref{sec("a", "k")}},
		{
			"projected: several sources, other kinds ignored",
			volumes(projected(
				corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				projCM("a", "k"),
				corev1.VolumeProjection{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "labels"}}}},
				projSecret("b"),
				corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "ca"}},
			)),
			[]refs.Ref{cm("a", "k"), secAll("b")},
		},
		{
			"projected: only serviceAccountToken and downwardAPI",
			volumes(projected(
				corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				corev1.VolumeProjection{DownwardAPI: &corev1.DownwardAPIProjection{}},
			)),
			[]refs.Ref{},
		},
		{
			"other volume types ignored",
			volumes(
				corev1.Volume{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				corev1.Volume{Name: "d", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
				corev1.Volume{Name: "p", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "a"}}},
			),
			[]refs.Ref{},
		},

		// Where references are found.
		{"init container", &corev1.PodSpec{InitContainers: []corev1.Container{env(envCM("a", "k"))}}, []refs.Ref{cm("a", "k")}},
		{
			"native sidecar",
			&corev1.PodSpec{InitContainers: []corev1.Container{{Name: "s", RestartPolicy: &always, EnvFrom: []corev1.EnvFromSource{fromSecret("a")}}}},
			[]refs.Ref{secAll("a")},
		},
		{"second container", containers(corev1.Container{Name: "x"}, env(envSecret("a", "k"))), []refs.Ref{sec("a", "k")}},

		// Merging.
		{"keyRef then envFrom: all keys", containers(corev1.Container{Env: []corev1.EnvVar{envCM("a", "k")}, EnvFrom: []corev1.EnvFromSource{fromCM("a")}}), []refs.Ref{cmAll("a")}},
		{"envFrom in init container, keyRef in container: all keys", &corev1.PodSpec{
			InitContainers: []corev1.Container{envFrom(fromCM("a"))},
			Containers:     []corev1.Container{env(envCM("a", "k"))},
		}, []refs.Ref{cmAll("a")}},
		{"volume items then whole volume: all keys", volumes(volSecret("a", "k"), projected(projSecret("a"))), []refs.Ref{secAll("a")}},
		{"two keyRefs: union", containers(env(envCM("a", "y"), envCM("a", "x"))), []refs.Ref{cm("a", "x", "y")}},
		{
			"keyRefs and items across containers: sorted, deduplicated",
			&corev1.PodSpec{
				InitContainers: []corev1.Container{env(envCM("a", "c"))},
				Containers:     []corev1.Container{env(envCM("a", "a"), envCM("a", "c")), env(envCM("a", "b"))},
				Volumes:        []corev1.Volume{volCM("a", "b", "d")},
			},
			[]refs.Ref{cm("a", "a", "b", "c", "d")},
		},
		{"ConfigMap and Secret of the same name are distinct", containers(env(envCM("x", "k"), envSecret("x", "k"))), []refs.Ref{cm("x", "k"), sec("x", "k")}},

		// Ignored.
		{
			"empty names",
			&corev1.PodSpec{
				Containers: []corev1.Container{{Env: []corev1.EnvVar{envCM("", "k"), envSecret("", "k")}, EnvFrom: []corev1.EnvFromSource{fromCM(""), fromSecret("")}}},
				Volumes:    []corev1.Volume{volCM(""), volSecret("", "k"), projected(projCM(""), projSecret(""))},
			},
			[]refs.Ref{},
		},
		{
			"env without valueFrom, fieldRef, resourceFieldRef",
			containers(env(
				corev1.EnvVar{Name: "A", Value: "configmap"},
				corev1.EnvVar{Name: "B", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				corev1.EnvVar{Name: "C", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			)),
			[]refs.Ref{},
		},
		{"envFrom with neither source", containers(envFrom(corev1.EnvFromSource{Prefix: "P_"})), []refs.Ref{}},
		{"empty pod spec: empty, non-nil", &corev1.PodSpec{}, []refs.Ref{}},

		// Order.
		{
			"sorted by ID whatever the order in the spec",
			&corev1.PodSpec{
				Containers: []corev1.Container{{
					Env:     []corev1.EnvVar{envSecret("z", "k"), envCM("b", "k")},
					EnvFrom: []corev1.EnvFromSource{fromSecret("a"), fromCM("b-x")},
				}},
				Volumes: []corev1.Volume{volCM("a"), volSecret("a.b")},
			},
			[]refs.Ref{cmAll("a"), cm("b", "k"), cmAll("b-x"), secAll("a"), secAll("a.b"), sec("z", "k")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := refs.FromPodSpec(tt.spec)
			// Which keys are required has its own table: TestRequired.
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(refs.Ref{}, "Required")); diff != "" {
				t.Errorf("FromPodSpec() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefUses(t *testing.T) {
	tests := []struct {
		name string
		ref  refs.Ref
		key  string
		want bool
	}{
		{"all keys: any key", cmAll("a"), "anything", true},
		{"all keys: empty key", secAll("a"), "", true},
		{"first key", cm("a", "a", "c", "e"), "a", true},
		{"middle key", cm("a", "a", "c", "e"), "c", true},
		{"last key", cm("a", "a", "c", "e"), "e", true},
		{"key between two", cm("a", "a", "c", "e"), "b", false},
		{"key after all", cm("a", "a", "c", "e"), "f", false},
		{"prefix of a key", cm("a", "abc"), "ab", false},
		{"no keys", cm("a"), "a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ref.Uses(tt.key); got != tt.want {
				t.Errorf("%+v.Uses(%q) = %v, want %v", tt.ref, tt.key, got, tt.want)
			}
		})
	}
}

func TestRefID(t *testing.T) {
	tests := []struct {
		ref  refs.Ref
		want string
	}{
		{cm("app-config", "k"), "ConfigMap/app-config"},
		{secAll("db.credentials"), "Secret/db.credentials"},
		{refs.Ref{Kind: refs.ConfigMap}, "ConfigMap/"},
	}
	for _, tt := range tests {
		if got := tt.ref.ID(); got != tt.want {
			t.Errorf("%+v.ID() = %q, want %q", tt.ref, got, tt.want)
		}
	}
}
