package csi

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
)

// many returns n objects with ids of about size bytes, at version v, the
// object i at version w instead.
func many(n, size int, v string, i int, w string) [][2]string {
	out := make([][2]string, n)
	for k := range n {
		id := fmt.Sprintf("secret/%04d-%s", k, strings.Repeat("x", max(size-12, 0)))
		out[k] = [2]string{id, v}
		if k == i {
			out[k][1] = w
		}
	}
	return out
}

// TestLimitsObjects: over MaxObjects, or MaxObjectsBytes of ids, the first
// objects by id are kept one by one and the others as FoldedID, whose
// hash still changes with any of their versions.
func TestLimitsObjects(t *testing.T) {
	tests := []struct {
		name       string
		n, size    int
		kept       int
		wantFolded int
	}{
		{"within", MaxObjects, 20, MaxObjects, 0},
		{"over the count", MaxObjects + 44, 20, MaxObjects, 44},
		{"over the bytes", 100, 400, MaxObjectsBytes / 400, 100 - MaxObjectsBytes/400},
	}
	for _, tt := range tests {
		s := FromUnstructured(status("web-1", "db", many(tt.n, tt.size, "v1", -1, "")...), testHasher)
		if got := len(s.Objects); got != tt.kept+min(tt.wantFolded, 1) {
			t.Errorf("%s: %d objects kept, want %d", tt.name, got, tt.kept)
		}
		if s.Over.Folded != tt.wantFolded || (tt.wantFolded > 0) != s.Over.Any() {
			t.Errorf("%s: over %+v, want %d folded", tt.name, s.Over, tt.wantFolded)
		}
		_, hasFolded := s.Objects[FoldedID]
		if hasFolded != (tt.wantFolded > 0) {
			t.Errorf("%s: folded object there: %t", tt.name, hasFolded)
		}
		size := 0
		for id := range s.Objects {
			size += len(id)
		}
		if size > MaxObjectsBytes+len(FoldedID) {
			t.Errorf("%s: %d bytes of ids kept", tt.name, size)
		}
		// A rotation of the last object (folded when over) changes the
		// digest, and only the key that holds it.
		r := FromUnstructured(status("web-1", "db", many(tt.n, tt.size, "v1", tt.n-1, "v2")...), testHasher)
		if r.Digest == s.Digest {
			t.Errorf("%s: a rotation of the last object is not seen", tt.name)
		}
		changed := 0
		for id, h := range r.Objects {
			if s.Objects[id] != h {
				changed++
			}
		}
		if changed != 1 || len(r.Objects) != len(s.Objects) {
			t.Errorf("%s: %d keys changed, want 1", tt.name, changed)
		}
	}
}

// TestLimitsIDs: ids too long, not printable or equal to FoldedID are
// kept as short printable stand-ins, distinct, whose hashes follow the
// whole id's version; a status naming no valid pod or class is refused.
func TestLimitsIDs(t *testing.T) {
	long := strings.Repeat("é", MaxIDBytes) // 2 bytes each
	ids := []string{long, long + "b", "a\nb", "bad\xffutf8", FoldedID, "secret/ok"}
	var objs [][2]string
	for _, id := range ids {
		objs = append(objs, [2]string{id, "v1"})
	}
	s := FromUnstructured(status("web-1", "db", objs...), testHasher)
	if s.Over.Shortened != 5 || s.Over.Folded != 0 || len(s.Objects) != len(ids) {
		t.Fatalf("over %+v, objects %d", s.Over, len(s.Objects))
	}
	for id := range s.Objects {
		if len(id) > 400 || !printable(id) || strings.ContainsAny(id, "\n") {
			t.Errorf("id kept %q (%d bytes)", id, len(id))
		}
	}
	if _, ok := s.Objects["secret/ok"]; !ok {
		t.Error("a valid id is not kept as is")
	}
	objs[0][1] = "v2"
	if r := FromUnstructured(status("web-1", "db", objs...), testHasher); r.Digest == s.Digest {
		t.Error("a rotation of a long id is not seen")
	}

	for name, u := range map[string]map[string]any{
		"class too long": {"podName": "web-1", "secretProviderClassName": strings.Repeat("c", 254)},
		"class newline":  {"podName": "web-1", "secretProviderClassName": "db\nX"},
		"pod not a name": {"podName": "Web 1", "secretProviderClassName": "db"},
	} {
		st := status("web-1", "db", [2]string{"secret/pw", "v1"})
		st.Object["status"].(map[string]any)["podName"] = u["podName"]
		st.Object["status"].(map[string]any)["secretProviderClassName"] = u["secretProviderClassName"]
		s := FromUnstructured(st, testHasher)
		if s.Over.Refused == "" || s.Class != "" || s.Pod != "" || len(s.Objects) != 0 {
			t.Errorf("%s: not refused: %+v", name, s)
		}
		n := s.Over.Note(s.Name, "web-1", "")
		if len(n) > note.MaxLen || strings.Contains(n, "\n") {
			t.Errorf("%s: note %q", name, n)
		}
	}
}

// TestLimitsOwners: only the owner reference naming the pod is kept.
func TestLimitsOwners(t *testing.T) {
	u := status("web-1", "db", [2]string{"secret/pw", "v1"})
	var owners []metav1.OwnerReference
	for i := range 1000 {
		owners = append(owners, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: fmt.Sprintf("p%d", i), UID: "x"})
	}
	u.SetOwnerReferences(append(owners, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "web-1", UID: "uid-pod"}))
	s := FromUnstructured(u, testHasher)
	if len(s.OwnerReferences) != 1 || s.PodUID() != "uid-pod" {
		t.Errorf("owners %d, pod UID %q", len(s.OwnerReferences), s.PodUID())
	}
}

// TestLimitsNote: the note quotes and cuts the names, fits an Event.
func TestLimitsNote(t *testing.T) {
	o := Over{Objects: 300, Folded: 44, Shortened: 2}
	n := o.Note(strings.Repeat("s", 300), "web-1", "db")
	for _, want := range []string{`"web-1"`, `"db"`, "300 objects", "the other 44 together", `"(other objects)"`, "(2 of them)"} {
		if !strings.Contains(n, want) {
			t.Errorf("note %q lacks %q", n, want)
		}
	}
	if strings.Contains(n, strings.Repeat("s", 65)) || len(n) > note.MaxLen {
		t.Errorf("note not cut: %q", n)
	}
}

// TestTrackerReports: a status over the limits is logged once per status
// and shape, and reported once per workload, class and shape, only for the
// classes the workload opted in to.
func TestTrackerReports(t *testing.T) {
	web := object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}
	tr := newTracker()
	big := many(MaxObjects+1, 20, "v1", -1, "")
	for _, pod := range []string{"a", "b"} {
		key := "shop/" + pod
		s := FromUnstructured(status(pod, "db", big...), testHasher)
		tr.observe(key, s, false)
		if !tr.log(key, s.Over, false) || tr.log(key, s.Over, false) {
			t.Errorf("%s: not logged once", pod)
		}
		tr.file(key, web)
	}
	if !tr.untold("shop/a") {
		t.Error("not untold before the report")
	}
	if got := tr.reports(web, func(string) bool { return false }); len(got) != 0 {
		t.Errorf("reported for a class not opted in: %+v", got)
	}
	got := tr.reports(web, func(string) bool { return true })
	if len(got) != 1 || got[0].Class != "db" || got[0].Over.Folded != 1 {
		t.Fatalf("reports %+v, want one", got)
	}
	if tr.untold("shop/b") || len(tr.reports(web, func(string) bool { return true })) != 0 {
		t.Error("reported twice")
	}
	// Another shape is reported again.
	s := FromUnstructured(status("a", "db", many(MaxObjects+5, 20, "v1", -1, "")...), testHasher)
	tr.observe("shop/a", s, true)
	tr.file("shop/a", web)
	if got := tr.reports(web, func(string) bool { return true }); len(got) != 1 || got[0].Over.Folded != 5 {
		t.Errorf("new shape: reports %+v", got)
	}
	if tr.log("shop/a", Over{}, true); len(tr.logged) != 1 {
		t.Errorf("logged %v after a status went", tr.logged)
	}
}
