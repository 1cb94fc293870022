package cause_test

import (
	"strings"
	"testing"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/note"
	"github.com/watcher-dev/watcher/internal/object"
)

func TestRendered(t *testing.T) {
	sealed := cause.Change{
		Source: object.Ref{Kind: "Secret", Namespace: "shop", Name: "db"}, Keys: []string{"password"},
		Old: "1a2b3c4d", New: "5e6f7a8b", SealedSecret: "db-sealed", ChangedBy: []string{"kubectl-edit"},
	}
	digest := cause.Change{Source: object.Ref{Kind: "ConfigMap", Namespace: "shop", Name: "cfg"}}
	rotated := cause.Change{Source: object.Ref{Kind: cause.SecretProviderClass, Namespace: "shop", Name: "db-creds"},
		Keys: []string{"secret/db-password"}, Old: "250aa928", New: "2dd7911d"}
	r := cause.Restart{Workload: object.Ref{Kind: "Deployment", Namespace: "shop", Name: "web"}, Changes: []cause.Change{sealed, digest}}

	for _, tc := range []struct{ got, want string }{
		{sealed.String(), "Secret shop/db (from SealedSecret shop/db-sealed) changed (keys: password) by kubectl-edit"},
		{sealed.Note(), "Secret db (from SealedSecret db-sealed) changed (keys: password; 1a2b3c4d→5e6f7a8b) by kubectl-edit"},
		{digest.String(), "ConfigMap shop/cfg changed (keys: not listed, recorded as one digest)"},
		{r.Note(), "Restarted because " + sealed.Note() + "; " + digest.Note()},
		{r.Sentence(true), "restart pending because Secret db (from SealedSecret db-sealed) changed (keys: password) by kubectl-edit, ConfigMap cfg changed (keys: not listed, recorded as one digest)"},
		{rotated.String(), "SecretProviderClass shop/db-creds rotated (objects: secret/db-password)"},
		{rotated.Note(), "SecretProviderClass db-creds rotated (objects: secret/db-password; 250aa928→2dd7911d)"},
		{r.Reason(), cause.ReasonRestarted},
		{r.Message(), "Restarted"},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}

	dry := r
	dry.DryRun, dry.OnDelete = true, "OnDelete"
	if dry.Reason() != cause.ReasonWouldRestart || !strings.HasPrefix(dry.Note(), "Dry run, nothing written: would update the template") {
		t.Errorf("dry run on delete: %s %q", dry.Reason(), dry.Note())
	}
	// The dry run says the same facts as the restart: the SealedSecret and
	// the writer are not lost.
	if !strings.Contains(dry.Note(), sealed.Note()) {
		t.Errorf("dry run note %q lacks %q", dry.Note(), sealed.Note())
	}
	kv := dry.KeysAndValues()
	if len(kv)%2 != 0 || kv[0] != "workload" || kv[1] != "Deployment shop/web" {
		t.Errorf("key/values %v", kv)
	}
}

func TestNoteBounded(t *testing.T) {
	var r cause.Restart
	for range 500 {
		r.Changes = append(r.Changes, cause.Change{Source: object.Ref{Kind: "ConfigMap", Namespace: "ns", Name: strings.Repeat("c", 200)}, Keys: []string{"k"}})
	}
	if n := len(r.Note()); n > note.MaxLen {
		t.Errorf("note of %d bytes, limit %d", n, note.MaxLen)
	}
}

// TestSay: a reader that renders names its own way (package alert) gets
// cause's words with only the names rendered, and a change whose keys are
// not known says nothing of them.
func TestSay(t *testing.T) {
	quote := func(s string) string { return "`" + s + "`" }
	c := cause.Change{Source: object.Ref{Kind: "Secret", Namespace: "shop", Name: "db"}, SealedSecret: "db", ChangedBy: []string{"a", "b"}}
	for _, tc := range []struct{ got, want string }{
		{c.Say(quote).Sentence(""), "Secret `shop/db` (from SealedSecret `shop/db`) changed (keys: not listed, recorded as one digest) by `a` and `b`"},
		{c.Say(func(s string) string { return s }).Sentence(""), c.String()},
		{cause.Change{Source: c.Source, Keys: []string{"k"}}.Say(quote).What, "keys: `k`"},
		{cause.Change{Source: c.Source, KeysUnknown: true}.Say(quote).Sentence(""), "Secret `shop/db` changed"},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}
}
