package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/pin"
)

// pinned returns a revision numbered n, created at minute n, running
// image and pinning pins ("configmap/app=app-pin-1,...").
func pinned(n int64, image, pins string) revision {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image,
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}}},
		Volumes: []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}}}}
	tmpl := corev1.PodTemplateSpec{Spec: spec}
	if pins != "" {
		tmpl.Annotations = map[string]string{pin.PinsAnnotation: pins}
	}
	return revision{Number: n, Object: "ReplicaSet web-" + string(rune('a'+n)), Created: time.Unix(60*n, 0), Template: tmpl}
}

// TestSortRevisions: newest first, by number (a rollback's revision is
// the highest, whatever its age), then by creation.
func TestSortRevisions(t *testing.T) {
	revs := []revision{pinned(2, "a", ""), pinned(10, "a", ""), pinned(1, "a", ""), pinned(3, "a", "")}
	revs[1].Created = time.Unix(0, 0) // an old ReplicaSet brought back by kubectl rollout undo
	sortRevisions(revs)
	var got []int64
	for _, r := range revs {
		got = append(got, r.Number)
	}
	if want := []int64{10, 3, 2, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("sorted %v, want %v", got, want)
	}
}

func fp(kv ...string) fingerprints {
	out := fingerprints{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestChangedKeys: added, removed and changed keys, sorted; the same
// values change nothing.
func TestChangedKeys(t *testing.T) {
	tests := []struct {
		old, cur fingerprints
		want     []string
	}{
		{fp("a", "1"), fp("a", "1"), nil},
		{fp("a", "1"), fp("a", "2"), []string{"a"}},
		{fp("a", "1", "b", "1"), fp("b", "1", "c", "1"), []string{"a", "c"}},
		{fp(), fp("z", "", "y", "1"), []string{"y", "z"}},
		{fp("a", "1", "b", "2"), fp("a", "2", "b", "1"), []string{"a", "b"}},
	}
	for _, tt := range tests {
		if got := changedKeys(tt.old, tt.cur); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("changedKeys = %v, want %v", got, tt.want)
		}
	}
}

// TestFingerprintKeepsNoValue: a Secret's fingerprints hold its keys and
// no value.
func TestFingerprintKeepsNoValue(t *testing.T) {
	sec := &corev1.Secret{Data: map[string][]byte{"password": []byte("hunter2")}}
	f := fingerprint(sec)
	plain := sha256.Sum256([]byte("hunter2"))
	if len(f) != 1 || f["password"] == "" || f["password"] == string(plain[:]) || f["password"] != fingerprint(sec)["password"] {
		t.Fatalf("fingerprint = %q: want a keyed hash, the same for the same value", f)
	}
	b, _ := json.Marshal(f)
	if strings.Contains(string(b), "hunter2") {
		t.Errorf("fingerprints hold the value: %s", b)
	}
}

// TestHistory: per revision, newest first, each pinned source against the
// revision before: first, same, changed (with its keys, writers and
// time), gone, unknown (the older snapshot gone); unpinned revisions;
// floating sources.
func TestHistory(t *testing.T) {
	at := time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC)
	snaps := map[string]snap{
		"configmap/app-pin-1": {Created: at, Keys: fp("mode", "v1", "old", "x")},
		"configmap/app-pin-2": {Created: at.Add(time.Hour), ChangedBy: []string{"e2e.test"}, Keys: fp("mode", "v2", "new", "y")},
		"secret/db-pin-1":     {Gone: true},
		"secret/db-pin-2":     {Created: at, Keys: fp("password", "p2")},
		"secret/db-pin-3":     {Created: at, Keys: fp("password", "p3")},
	}
	revs := []revision{
		pinned(5, "app:2", "configmap/app=app-pin-2,secret/db=db-pin-3"),
		pinned(4, "app:1", "configmap/app=app-pin-2,secret/db=db-pin-2"),
		pinned(3, "app:1", "configmap/app=app-pin-1,secret/db=db-pin-1"),
		pinned(2, "app:1", "configmap/app=app-pin-1"),
		pinned(1, "app:1", ""),
	}
	got := history(revs, snaps)
	status := func(h RevisionHistory) string {
		var out []string
		for _, s := range h.Sources {
			out = append(out, s.Source+":"+s.Status+":"+strings.Join(s.Keys, "+"))
		}
		return strings.Join(out, " ")
	}
	want := []string{
		"configmap/app:same: secret/db:changed:password",
		"configmap/app:changed:mode+new+old secret/db:unknown:",
		"configmap/app:same: secret/db:gone:",
		"configmap/app:first:",
		"",
	}
	for i, h := range got {
		if s := status(h); s != want[i] {
			t.Errorf("revision %d: %q, want %q", h.Revision, s, want[i])
		}
		if h.Current != (i == 0) || h.Pinned != (i < 4) {
			t.Errorf("revision %d: current %v, pinned %v", h.Revision, h.Current, h.Pinned)
		}
	}
	if got[0].Images[0] != "app:2" || got[1].Sources[0].Digest != "2" || !reflect.DeepEqual(got[1].Sources[0].ChangedBy, []string{"e2e.test"}) ||
		!got[1].Sources[0].Since.Equal(at.Add(time.Hour)) {
		t.Errorf("revision 4: %+v", got[1])
	}
	if !reflect.DeepEqual(got[3].Floating, []string{"secret/db"}) || got[4].Floating != nil {
		t.Errorf("floating: %v, %v", got[3].Floating, got[4].Floating)
	}
}

// TestRollbackTarget: a revision not kept, one that pins nothing and one
// whose snapshot is gone are refused.
func TestRollbackTarget(t *testing.T) {
	revs := []revision{pinned(3, "app:2", "configmap/app=app-pin-2"), pinned(2, "app:1", "configmap/app=app-pin-1,secret/db=db-pin-1"), pinned(1, "app:1", "")}
	goneDB := func(src pin.Source, _ string) bool { return src.Kind == pin.Secret }
	none := func(pin.Source, string) bool { return false }
	tests := []struct {
		n    int64
		gone func(pin.Source, string) bool
		err  string
	}{
		{2, none, ""},
		{3, goneDB, ""},
		{7, none, "no revision 7: the revisions kept are 3, 2, 1"},
		{1, none, "revision 1 pins nothing"},
		{2, goneDB, "revision 2 pins snapshots that are gone (secret/db=db-pin-1)"},
	}
	for _, tt := range tests {
		rev, err := rollbackTarget(revs, tt.n, tt.gone)
		switch {
		case tt.err == "" && (err != nil || rev.Number != tt.n):
			t.Errorf("revision %d: %v, %v", tt.n, rev.Number, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("revision %d: error %v, want %q", tt.n, err, tt.err)
		}
	}
}

// TestRollbackPatch: one merge patch, of the pins and their signature
// only, conditional on the resourceVersion read.
func TestRollbackPatch(t *testing.T) {
	pins := pin.Pins{{Kind: pin.Secret, Name: "db"}: "db-pin-1", {Kind: pin.ConfigMap, Name: "app"}: "app-pin-1"}
	for _, tt := range []struct{ mac, want string }{
		{"", `{"metadata":{"resourceVersion":"42"},"spec":{"template":{"metadata":{"annotations":{"watcher.dev/pins":"configmap/app=app-pin-1,secret/db=db-pin-1","watcher.dev/pins-mac":null}}}}}`},
		// the revision's signature goes with its pins: the hand-over
		// (snapshot.Owners) acts on signed pins only
		{"m1", `{"metadata":{"resourceVersion":"42"},"spec":{"template":{"metadata":{"annotations":{"watcher.dev/pins":"configmap/app=app-pin-1,secret/db=db-pin-1","watcher.dev/pins-mac":"m1"}}}}}`},
	} {
		b, err := rollbackPatch("42", pins, tt.mac)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("patch %s\nwant  %s", b, tt.want)
		}
	}
}

// TestControlledBy: only revisions whose controller is the workload.
func TestControlledBy(t *testing.T) {
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: "w"}}
	yes := true
	for _, tt := range []struct {
		refs []metav1.OwnerReference
		want bool
	}{
		{[]metav1.OwnerReference{{UID: "w", Controller: &yes}}, true},
		{[]metav1.OwnerReference{{UID: "w"}}, false},
		{[]metav1.OwnerReference{{UID: "x", Controller: &yes}}, false},
		{nil, false},
	} {
		obj := &metav1.ObjectMeta{OwnerReferences: tt.refs}
		if got := controlledBy(obj, owner); got != tt.want {
			t.Errorf("controlledBy(%v) = %v", tt.refs, got)
		}
	}
}

// TestRevisionCommandsUsage: what history, rollback and stale say, and
// their exit codes, before they connect to anything.
func TestRevisionCommandsUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"kubectl-watcher", "--help"}, 0, "kubectl watcher rollback KIND/NAME --to-revision N"},
		{[]string{"watcher", "history", "--help"}, 0, "never a value"},
		{[]string{"watcher", "history"}, 2, "want one KIND/NAME"},
		{[]string{"watcher", "history", "deploy/web", "-o", "dot"}, 2, `invalid --output "dot"`},
		{[]string{"watcher", "rollback", "--help"}, 0, "keeps the\ncurrent image"},
		{[]string{"watcher", "rollback", "deploy/web"}, 2, "want --to-revision N"},
		{[]string{"watcher", "rollback", "deploy/web", "--to-revision", "0"}, 2, "want --to-revision N"},
		{[]string{"watcher", "stale", "--help"}, 0, "since\nwhen and why"},
		{[]string{"watcher", "stale", "deploy/web"}, 2, `unexpected argument "deploy/web"`},
		{[]string{"watcher", "stale", "-A", "-o", "dot"}, 2, `invalid --output "dot": want text, json`},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), tt.args, &out, &errOut)
		if code != tt.code || !strings.Contains(errOut.String(), tt.out) {
			t.Errorf("Main(%q) = %d, %q; want %d and %q", tt.args, code, errOut.String(), tt.code, tt.out)
		}
	}
}
