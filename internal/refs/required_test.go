package refs_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/refs"
)

// req returns r with Required set to keys.
func req(r refs.Ref, keys ...string) refs.Ref {
	r.Required = keys
	return r
}

// opt returns r marked optional: every reference to it is.
func opt(r refs.Ref) refs.Ref {
	r.Optional = true
	return r
}

// optEnv sets the optional field of the key reference of e.
func optEnv(e corev1.EnvVar, optional *bool) corev1.EnvVar {
	if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
		r.Optional = optional
	}
	if r := e.ValueFrom.SecretKeyRef; r != nil {
		r.Optional = optional
	}
	return e
}

// optVol sets the optional field of the configMap or secret of v.
func optVol(v corev1.Volume, optional *bool) corev1.Volume {
	if v.ConfigMap != nil {
		v.ConfigMap.Optional = optional
	}
	if v.Secret != nil {
		v.Secret.Optional = optional
	}
	return v
}

// optProj sets the optional field of the configMap or secret of p.
func optProj(p corev1.VolumeProjection, optional *bool) corev1.VolumeProjection {
	if p.ConfigMap != nil {
		p.ConfigMap.Optional = optional
	}
	if p.Secret != nil {
		p.Secret.Optional = optional
	}
	return p
}

func TestRequired(t *testing.T) {
	unset, no, yes := (*bool)(nil), ptr.To(false), ptr.To(true)
	tests := []struct {
		name string
		spec *corev1.PodSpec
		want []refs.Ref
	}{
		// One case per row of the package comment's table, and per value
		// of optional.
		{"configMapKeyRef, optional unset", containers(env(optEnv(envCM("a", "k"), unset))), []refs.Ref{req(cm("a", "k"), "k")}},
		{"configMapKeyRef, optional false", containers(env(optEnv(envCM("a", "k"), no))), []refs.Ref{req(cm("a", "k"), "k")}},
		{"configMapKeyRef, optional true", containers(env(optEnv(envCM("a", "k"), yes))), []refs.Ref{opt(cm("a", "k"))}},
		{"secretKeyRef, optional unset", containers(env(optEnv(envSecret("a", "k"), unset))), []refs.Ref{req(sec("a", "k"), "k")}},
		{"secretKeyRef, optional false", containers(env(optEnv(envSecret("a", "k"), no))), []refs.Ref{req(sec("a", "k"), "k")}},
		{"secretKeyRef, optional true", containers(env(optEnv(envSecret("a", "k"), yes))), []refs.Ref{opt(sec("a", "k"))}},
		{"configMap volume items, optional unset", volumes(optVol(volCM("a", "x", "y"), unset)), []refs.Ref{req(cm("a", "x", "y"), "x", "y")}},
		{"configMap volume items, optional false", volumes(optVol(volCM("a", "x", "y"), no)), []refs.Ref{req(cm("a", "x", "y"), "x", "y")}},
		{"configMap volume items, optional true", volumes(optVol(volCM("a", "x", "y"), yes)), []refs.Ref{opt(cm("a", "x", "y"))}},
		{"secret volume items, optional unset", volumes(optVol(volSecret("a", "x"), unset)), []refs.Ref{req(sec("a", "x"), "x")}},
		{"secret volume items, optional false", volumes(optVol(volSecret("a", "x"), no)), []refs.Ref{req(sec("a", "x"), "x")}},
		{"secret volume items, optional true", volumes(optVol(volSecret("a", "x"), yes)), []refs.Ref{opt(sec("a", "x"))}},
		{"projected configMap items, optional unset", volumes(projected(optProj(projCM("a", "x"), unset))), []refs.Ref{req(cm("a", "x"), "x")}},
		{"projected configMap items, optional false", volumes(projected(optProj(projCM("a", "x"), no))), []refs.Ref{req(cm("a", "x"), "x")}},
		{"projected configMap items, optional true", volumes(projected(optProj(projCM("a", "x"), yes))), []refs.Ref{opt(cm("a", "x"))}},
		{"projected secret items, optional unset", volumes(projected(optProj(projSecret("a", "x"), unset))), []refs.Ref{req(sec("a", "x"), "x")}},
		{"projected secret items, optional false", volumes(projected(optProj(projSecret("a", "x"), no))), []refs.Ref{req(sec("a", "x"), "x")}},
		{"projected secret items, optional true", volumes(projected(optProj(projSecret("a", "x"), yes))), []refs.Ref{opt(sec("a", "x"))}},
		{"projected: each source its own optional", volumes(projected(optProj(projCM("a", "x"), yes), optProj(projCM("a", "y"), no))), []refs.Ref{req(cm("a", "x", "y"), "y")}},
		{"envFrom, not optional: no key named", containers(envFrom(fromCM("a"), fromSecret("b"))), []refs.Ref{cmAll("a"), secAll("b")}},
		{"whole volume, not optional: no key named", volumes(optVol(volSecret("a"), no), projected(projCM("b"))), []refs.Ref{cmAll("b"), secAll("a")}},

		// Merging.
		{"optional and required reference to one key: required", containers(env(optEnv(envCM("a", "k"), yes), optEnv(envCM("a", "k"), unset))), []refs.Ref{req(cm("a", "k"), "k")}},
		{"required then optional reference to one key: required", containers(env(optEnv(envCM("a", "k"), no)), env(optEnv(envCM("a", "k"), yes))), []refs.Ref{req(cm("a", "k"), "k")}},
		{"optional key and required key: the required one", containers(env(optEnv(envCM("a", "x"), yes), envCM("a", "y"))), []refs.Ref{req(cm("a", "x", "y"), "y")}},
		{
			"required items, optional keyRef, across containers and volumes",
			&corev1.PodSpec{
				InitContainers: []corev1.Container{env(optEnv(envSecret("a", "b"), yes))},
				Containers:     []corev1.Container{env(optEnv(envSecret("a", "d"), yes))},
				Volumes:        []corev1.Volume{volSecret("a", "c", "a"), optVol(volSecret("a", "d", "e"), yes)},
			},
			[]refs.Ref{req(sec("a", "a", "b", "c", "d", "e"), "a", "c")},
		},
		{"required keyRef then envFrom: all keys, none required", containers(corev1.Container{Env: []corev1.EnvVar{envCM("a", "k")}, EnvFrom: []corev1.EnvFromSource{fromCM("a")}}), []refs.Ref{cmAll("a")}},
		{"required items then optional whole volume: all keys, none required", volumes(volCM("a", "k"), optVol(volCM("a"), yes)), []refs.Ref{cmAll("a")}},
		{"ConfigMap and Secret of one name apart", containers(env(envCM("x", "k"), optEnv(envSecret("x", "k"), yes))), []refs.Ref{req(cm("x", "k"), "k"), opt(sec("x", "k"))}},
		{"optional envFrom and optional volume: optional", containers(corev1.Container{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Optional: yes}}}}), []refs.Ref{opt(cmAll("a"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := refs.FromPodSpec(tt.spec)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FromPodSpec() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefRequires(t *testing.T) {
	r := req(cm("a", "a", "b", "c", "d"), "b", "d")
	for key, want := range map[string]bool{"a": false, "b": true, "c": false, "d": true, "e": false, "": false} {
		if got := r.Requires(key); got != want {
			t.Errorf("%+v.Requires(%q) = %v, want %v", r, key, got, want)
		}
	}
	if cmAll("a").Requires("k") {
		t.Error("a reference to every key requires none")
	}
}
