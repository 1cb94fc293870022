package pin_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/watcher-dev/watcher/internal/pin"
)

func TestParseAndString(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"configmap/app=app-pin-1,secret/db=db-pin-2", "configmap/app=app-pin-1,secret/db=db-pin-2"},
		{"secret/db=db-pin-2,configmap/app=app-pin-1", "configmap/app=app-pin-1,secret/db=db-pin-2"}, // sorted
		{"configmap/App=x,pod/a=b,configmap/a=,configmap/a=b=c,,configmap/ok=ok-pin-3", "configmap/ok=ok-pin-3"},
		{"configmap/a,b=c", ""},
	}
	for _, tt := range tests {
		if got := pin.Parse(tt.in).String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDigest(t *testing.T) {
	a := pin.Parse("configmap/app=app-pin-1,secret/db=db-pin-2")
	b := pin.Parse("secret/db=db-pin-2,configmap/app=app-pin-1")
	c := pin.Parse("configmap/app=app-pin-9,secret/db=db-pin-2")
	if a.Digest() != b.Digest() || a.Digest() == c.Digest() || len(a.Digest()) != 16 {
		t.Errorf("digests: %q %q %q", a.Digest(), b.Digest(), c.Digest())
	}
	if pin.Pins(nil).Digest() != "" {
		t.Error("no pins have a digest")
	}
}

func TestSnapshotName(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	if got := pin.SnapshotName("app", sum); got != "app-pin-abababababababababab" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("a", 240) + "." + strings.Repeat("b", 12)
	got := pin.SnapshotName(long, sum)
	if len(got) > 253 || !strings.HasSuffix(got, "-pin-abababababababababab") || strings.Contains(got, ".-") {
		t.Errorf("long name: %q (%d)", got, len(got))
	}
}

func TestJudge(t *testing.T) {
	p := pin.Parse("configmap/app=app-pin-1")
	tests := []struct {
		template pin.Pins
		label    string
		want     pin.Verdict
	}{
		{nil, "", pin.Unpinned},
		{nil, p.Digest(), pin.Stripped},
		{p, p.Digest(), pin.Current},
		{p, "0123456789abcdef", pin.RolledBack},
		{p, "", pin.RolledBack},
	}
	for _, tt := range tests {
		if got := pin.Judge(tt.template, tt.label); got != tt.want {
			t.Errorf("Judge(%v, %q) = %v, want %v", tt.template, tt.label, got, tt.want)
		}
	}
}

func TestFloats(t *testing.T) {
	tests := []struct {
		kind, typ string
		ann       map[string]string
		floats    bool
	}{
		{pin.ConfigMap, "", nil, false},
		{pin.ConfigMap, "", map[string]string{pin.Annotation: "false"}, true},
		{pin.Secret, "Opaque", nil, false},
		{pin.Secret, "kubernetes.io/tls", nil, false},
		{pin.Secret, "kubernetes.io/service-account-token", nil, true},
		{pin.Secret, "kubernetes.io/dockerconfigjson", nil, true},
		{pin.Secret, "kubernetes.io/dockercfg", nil, true},
		{pin.Secret, "kubernetes.io/tls", map[string]string{"cert-manager.io/certificate-name": "web"}, true},
		{pin.Secret, "Opaque", map[string]string{pin.Annotation: "false"}, true},
		{pin.Secret, "Opaque", map[string]string{pin.Annotation: "true"}, false},
	}
	for _, tt := range tests {
		if got := pin.Floats(tt.kind, tt.typ, tt.ann) != ""; got != tt.floats {
			t.Errorf("Floats(%s, %s, %v) = %v, want %v", tt.kind, tt.typ, tt.ann, got, tt.floats)
		}
	}
}

func TestSnapshot(t *testing.T) {
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "u1"}
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db",
		Labels: map[string]string{"app.kubernetes.io/instance": "argo"}, Annotations: map[string]string{"x": "y"}},
		Type: "kubernetes.io/tls", Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}}
	snap := pin.Snapshot(src, "db-pin-1", owner).(*corev1.Secret)
	if snap.Name != "db-pin-1" || snap.Namespace != "ns" || !ptr.Deref(snap.Immutable, false) || snap.Type != src.Type ||
		len(snap.Labels) != 1 || snap.Labels[pin.SnapshotLabel] != "true" || len(snap.Annotations) != 1 ||
		snap.Annotations[pin.SnapshotOf] != "secret/db" || string(snap.Data["tls.key"]) != "k" || len(snap.OwnerReferences) != 1 {
		t.Errorf("snapshot: %+v", snap)
	}
	if !pin.IsSnapshot(snap, pin.Source{Kind: pin.Secret, Name: "db"}) || pin.IsSnapshot(snap, pin.Source{Kind: pin.Secret, Name: "other"}) || pin.IsSnapshot(src, pin.Source{Kind: pin.Secret, Name: "db"}) {
		t.Error("IsSnapshot")
	}
}

func TestHanded(t *testing.T) {
	wl := metav1.OwnerReference{Kind: "Deployment", UID: "w"}
	other := metav1.OwnerReference{Kind: "Deployment", UID: "o"}
	rs := metav1.OwnerReference{Kind: "ReplicaSet", UID: "r"}
	got, changed := pin.Handed([]metav1.OwnerReference{wl, other}, rs, "w")
	if !changed || len(got) != 2 || got[0].UID != "o" || got[1].UID != "r" {
		t.Errorf("Handed = %v, %v", got, changed)
	}
	if _, changed := pin.Handed(got, rs, "w"); changed {
		t.Error("handed twice")
	}
	if got, changed := pin.Owned([]metav1.OwnerReference{rs}, wl); !changed || len(got) != 2 {
		t.Errorf("Owned = %v", got)
	}
}
