package producer

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// obj returns an object of kind k with generation gen, metadata meta
// merged in, and fields (spec, status) as given.
func obj(k *kind, gen int64, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for f, v := range fields {
		u.Object[f] = v
	}
	u.SetGroupVersionKind(k.gvk)
	u.SetNamespace("shop")
	u.SetName("db")
	u.SetGeneration(gen)
	return u
}

func cond(t, status, reason, message string, gen ...int64) map[string]any {
	c := map[string]any{"type": t, "status": status, "reason": reason, "message": message}
	if len(gen) > 0 {
		c["observedGeneration"] = gen[0]
	}
	return c
}

func status(conds ...map[string]any) map[string]any {
	list := make([]any, len(conds))
	for i, c := range conds {
		list[i] = c
	}
	return map[string]any{"conditions": list}
}

func with(m map[string]any, k string, v any) map[string]any {
	m[k] = v
	return m
}

type row struct {
	name   string
	obj    *unstructured.Unstructured
	state  State
	reason string
	says   string // a part of the message
}

func run(t *testing.T, k *kind, rows []row) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			state, reason, message := k.current(Trim(k, r.obj))
			if state != r.state || reason != r.reason || !strings.Contains(message, r.says) {
				t.Errorf("got %s %s %q, want %s %s saying %q", state, reason, message, r.state, r.reason, r.says)
			}
			if len(message) > 3*maxMessage {
				t.Errorf("message of %d bytes", len(message))
			}
		})
	}
}

func TestExternalSecret(t *testing.T) {
	k := externalSecretV1
	es := func(synced string, st map[string]any, annotations map[string]string) *unstructured.Unstructured {
		if synced != "" {
			st["syncedResourceVersion"] = synced
		}
		u := obj(k, 3, map[string]any{"status": st, "spec": map[string]any{"data": []any{map[string]any{"secretKey": "password"}}}})
		u.SetLabels(map[string]string{"app": "web"})
		u.SetAnnotations(annotations)
		return u
	}
	now := Version(3, map[string]string{"app": "web"}, map[string]string{"team": "a"})
	forced := map[string]string{"team": "a", ForceSyncAnnotation: "1700000000"}
	refresh := func(u *unstructured.Unstructured, policy, interval string) *unstructured.Unstructured {
		if policy != "" {
			u.Object["spec"].(map[string]any)["refreshPolicy"] = policy
		}
		if interval != "" {
			u.Object["spec"].(map[string]any)["refreshInterval"] = interval
		}
		return u
	}
	ready := func() map[string]any { return status(cond("Ready", "True", "SecretSynced", "ok")) }
	run(t, k, []row{
		{"synced once, CreatedOnce", refresh(es(now, ready(), forced), "CreatedOnce", "1h"), Current, ReasonCurrent, "synced once"},
		{"synced once, interval 0", refresh(es(now, ready(), forced), "", "0s"), Current, ReasonCurrent, "synced once"},
		{"synced once, Periodic interval 0", refresh(es(now, ready(), forced), "Periodic", "0"), Current, ReasonCurrent, "synced once"},
		{"periodic", refresh(es(now, ready(), forced), "Periodic", "1h"), Progressing, ReasonNotSynced, now},
		{"on change, interval 0", refresh(es(now, ready(), forced), "OnChange", "0s"), Progressing, ReasonNotSynced, now},
		{"CreatedOnce, never synced", refresh(es("", ready(), forced), "CreatedOnce", ""), Progressing, ReasonNotSynced, `""`},
		{"interval not a duration", refresh(es(now, ready(), forced), "", "soon"), Progressing, ReasonNotSynced, now},
		{"synced now", es(now, status(cond("Ready", "True", "SecretSynced", "ok")), map[string]string{"team": "a"}), Current, ReasonCurrent, now},
		{"annotation moved the version", es(now, status(cond("Ready", "True", "SecretSynced", "ok")), forced), Progressing, ReasonNotSynced, now},
		{"older generation synced", es(Version(2, map[string]string{"app": "web"}, map[string]string{"team": "a"}), status(cond("Ready", "True", "SecretSynced", "ok")), map[string]string{"team": "a"}), Progressing, ReasonNotSynced, "2-"},
		{"never synced", es("", status(cond("Ready", "True", "SecretSynced", "ok")), map[string]string{"team": "a"}), Progressing, ReasonNotSynced, `synced version ""`},
		{"sync error", es(now, status(cond("Ready", "False", "SecretSyncedError", "could not get secret data from provider")), map[string]string{"team": "a"}), Failed, ReasonFailed, "SecretSyncedError"},
		{"unknown", es(now, status(cond("Ready", "Unknown", "", "")), map[string]string{"team": "a"}), Progressing, ReasonNotReady, "Unknown"},
		{"no status", obj(k, 1, nil), Progressing, ReasonNoStatus, "no Ready"},
		{"no Ready", es(now, status(cond("Deleted", "False", "SecretDeleted", "")), nil), Progressing, ReasonNoStatus, "no Ready"},
		{"conditions not a list", es(now, map[string]any{"conditions": "yes"}, nil), Progressing, ReasonMalformed, "not a list"},
		{"status not an object", obj(k, 1, map[string]any{"status": []any{1}}), Progressing, ReasonMalformed, "not a list"},
		{"synced version not a string", es("", map[string]any{"conditions": []any{cond("Ready", "True", "", "")}, "syncedResourceVersion": map[string]any{}}, nil), Progressing, ReasonNotSynced, "malformed"},
		{"conditions of any shape", es(now, map[string]any{"conditions": []any{"x", 3, map[string]any{"type": 7}, cond("Ready", "True", "", "")}}, map[string]string{"team": "a"}), Current, ReasonCurrent, ""},
		{"long message cut", es(now, status(cond("Ready", "False", "SecretSyncedError", strings.Repeat("é", 5000))), nil), Failed, ReasonFailed, "…"},
	})
}

// TestVersion holds Version to values computed apart from Go's fmt (the
// hex SHA3-224 of the text ESO hashes, by Python's hashlib), so that it
// is ESO's utils.ObjectHash of HashMeta's struct exactly.
func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		gen                 int64
		labels, annotations map[string]string
		want                string
	}{
		// sha3_224("{annotations:map[] labels:map[]}")
		{1, nil, nil, "1-f47fe3c0b255b6dd8047cdffa772587bb829efe7a1cb70febeda2eb2"},
		{1, map[string]string{}, map[string]string{}, "1-f47fe3c0b255b6dd8047cdffa772587bb829efe7a1cb70febeda2eb2"},
		// sha3_224("{annotations:map[a:b force-sync:1700000000] labels:map[app:web]}")
		{7, map[string]string{"app": "web"}, map[string]string{"force-sync": "1700000000", "a": "b"}, "7-cf2b05a84c21da1925bd8648ddf20a251abefbb83ac7de96757b0166"},
	} {
		if got := Version(tc.gen, tc.labels, tc.annotations); got != tc.want {
			t.Errorf("Version(%d, %v, %v) = %s, want %s", tc.gen, tc.labels, tc.annotations, got, tc.want)
		}
	}
}

func TestCertificate(t *testing.T) {
	k := certificateV1
	crt := func(gen int64, st map[string]any) *unstructured.Unstructured {
		return obj(k, gen, map[string]any{"spec": map[string]any{"secretName": "db-tls"}, "status": st})
	}
	run(t, k, []row{
		{"ready", crt(2, status(cond("Ready", "True", "Ready", "Certificate is up to date and has not expired", 2))), Current, ReasonCurrent, "generation 2"},
		{"ready, issued (server-side apply)", crt(2, status(cond("Ready", "True", "Ready", "", 2), cond("Issuing", "False", "Issued", "", 2))), Current, ReasonCurrent, ""},
		{"renewing", crt(2, status(cond("Ready", "True", "Ready", "", 2), cond("Issuing", "True", "Renewing", "Renewing certificate as renewal was scheduled", 2))), Progressing, ReasonIssuing, "Renewing"},
		{"first issuance", crt(1, status(cond("Ready", "False", "DoesNotExist", "Issuing certificate as Secret does not exist", 1), cond("Issuing", "True", "DoesNotExist", "", 1))), Progressing, ReasonIssuing, "DoesNotExist"},
		{"issuance failed", crt(2, status(cond("Ready", "False", "DoesNotExist", "", 2), cond("Issuing", "False", "Failed", "The certificate request has failed to complete and will be retried: ACME error", 2))), Failed, ReasonFailed, "ACME error"},
		{"request denied", crt(2, status(cond("Ready", "True", "Ready", "", 2), cond("Issuing", "False", "Denied", "denied by policy", 2))), Failed, ReasonFailed, "Denied"},
		{"failure of an older spec", crt(3, status(cond("Ready", "False", "DoesNotExist", "", 2), cond("Issuing", "False", "Failed", "", 2))), Progressing, ReasonOldGeneration, "generation 2"},
		{"ready for an older spec", crt(3, status(cond("Ready", "True", "Ready", "", 2))), Progressing, ReasonOldGeneration, "generation 2"},
		{"ready with no generation", crt(3, status(cond("Ready", "True", "Ready", ""))), Progressing, ReasonOldGeneration, "generation none"},
		{"not ready, to be issued", crt(2, status(cond("Ready", "False", "Expired", "Certificate expired", 2))), Progressing, ReasonNotReady, "Expired"},
		{"no status", crt(1, nil), Progressing, ReasonNoStatus, "no Ready"},
		{"no conditions", crt(1, map[string]any{}), Progressing, ReasonNoStatus, "no Ready"},
		{"malformed", crt(1, map[string]any{"conditions": map[string]any{"Ready": "True"}}), Progressing, ReasonMalformed, "not a list"},
		{"generation as a string", crt(1, status(map[string]any{"type": "Ready", "status": "True", "observedGeneration": "1"})), Progressing, ReasonOldGeneration, "none"},
	})
}

func TestSealedSecret(t *testing.T) {
	k := sealedSecretV1alpha1
	ss := func(gen int64, st map[string]any) *unstructured.Unstructured {
		return obj(k, gen, map[string]any{"spec": map[string]any{"encryptedData": map[string]any{"password": "AgBy3i4OJSWK+PiTySYZZA=="}}, "status": st})
	}
	run(t, k, []row{
		{"synced", ss(2, with(status(cond("Synced", "True", "", "")), "observedGeneration", int64(2))), Current, ReasonCurrent, "generation 2"},
		{"synced, older generation", ss(3, with(status(cond("Synced", "True", "", "")), "observedGeneration", int64(2))), Progressing, ReasonOldGeneration, "generation 2"},
		{"no observed generation", ss(3, status(cond("Synced", "True", "", ""))), Progressing, ReasonOldGeneration, "none"},
		{"cannot decrypt", ss(2, with(status(cond("Synced", "False", "ErrUnsealFailed", "no key could decrypt secret (password)")), "observedGeneration", int64(2))), Failed, ReasonFailed, "no key could decrypt"},
		{"failure of an older generation", ss(3, with(status(cond("Synced", "False", "", "")), "observedGeneration", int64(2))), Progressing, ReasonOldGeneration, ""},
		{"no status", ss(1, nil), Progressing, ReasonNoStatus, "no Synced"},
		{"generation not a number", ss(1, with(status(cond("Synced", "True", "", "")), "observedGeneration", "one")), Progressing, ReasonMalformed, "observedGeneration"},
		{"generation as a float", ss(2, with(status(cond("Synced", "True", "", "")), "observedGeneration", float64(2))), Current, ReasonCurrent, ""},
	})
}

func TestTrimKeepsNoSpec(t *testing.T) {
	u := obj(sealedSecretV1alpha1, 1, map[string]any{
		"spec":   map[string]any{"encryptedData": map[string]any{"password": "AgBy3i4OJSWK"}},
		"status": map[string]any{"observedGeneration": int64(1), "other": "x"},
	})
	u.SetAnnotations(map[string]string{"a": "b"})
	got := Trim(sealedSecretV1alpha1, u)
	if _, ok := got.Object["spec"]; ok || len(got.GetAnnotations()) > 0 || got.Object["status"].(map[string]any)["other"] != nil {
		t.Errorf("Trim kept %v", got.Object)
	}
	if target(got) != "db" {
		t.Errorf("target %q, want db", target(got))
	}
	es := obj(externalSecretV1, 1, map[string]any{"spec": map[string]any{"target": map[string]any{"name": "db-creds"}, "data": []any{"x"}}})
	if got := Trim(externalSecretV1, es); target(got) != "db-creds" || got.Object["spec"] != nil || cachedVersion(got) != Version(1, nil, nil) {
		t.Errorf("Trim(ExternalSecret) = %v", got.Object)
	}
	es = obj(externalSecretV1, 1, map[string]any{"spec": map[string]any{"target": map[string]any{"creationPolicy": "None"}}})
	if got := target(Trim(externalSecretV1, es)); got != "" {
		t.Errorf("target of creationPolicy None = %q, want none", got)
	}
	if got := target(Trim(externalSecretV1, obj(externalSecretV1, 1, nil))); got != "db" {
		t.Errorf("default target = %q, want the ExternalSecret's name", got)
	}
}

func TestGeneric(t *testing.T) {
	owner := func(gen int64, st map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Database", "status": st}}
		u.SetGeneration(gen)
		return u
	}
	for _, tc := range []struct {
		name     string
		obj      *unstructured.Unstructured
		producer bool
		state    State
		says     string
	}{
		{"ready", owner(2, with(status(cond("Ready", "True", "", "")), "observedGeneration", int64(2))), true, Current, "generation 2"},
		{"ready, generation on the condition", owner(2, status(cond("Ready", "True", "", "", 2))), true, Current, ""},
		{"lagging", owner(3, with(status(cond("Ready", "True", "", "")), "observedGeneration", int64(2))), true, Progressing, "generation 2"},
		{"failed", owner(2, with(status(cond("Ready", "False", "AuthFailed", "bad password")), "observedGeneration", int64(2))), true, Failed, "AuthFailed"},
		{"reconciling", owner(2, with(status(cond("Ready", "False", "", ""), cond("Reconciling", "True", "Progressing", "")), "observedGeneration", int64(2))), true, Progressing, "Reconciling"},
		{"stalled", owner(2, with(status(cond("Ready", "Unknown", "", ""), cond("Stalled", "True", "", "quota")), "observedGeneration", int64(2))), true, Failed, "quota"},
		{"unknown", owner(2, with(status(cond("Ready", "Unknown", "", "")), "observedGeneration", int64(2))), true, Progressing, "Unknown"},
		{"malformed", owner(2, map[string]any{"conditions": 5}), true, Progressing, "cannot be read"},
		{"a Deployment", owner(2, with(status(cond("Available", "True", "", "")), "observedGeneration", int64(2))), false, 0, ""},
		{"Ready but no generation", owner(2, status(cond("Ready", "True", "", ""))), false, 0, ""},
		{"no status", owner(2, nil), false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, _, message, ok := generic(tc.obj)
			if ok != tc.producer || state != tc.state || !strings.Contains(message, tc.says) {
				t.Errorf("got %v %s %q, want %v %s saying %q", ok, state, message, tc.producer, tc.state, tc.says)
			}
		})
	}
}

// TestJudge: an object of a followed kind, as the API server serves it,
// is judged as the Follower judges its cache, about the Secret it writes;
// another kind, or an ExternalSecret writing none, is not judged.
func TestJudge(t *testing.T) {
	es := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"namespace": "shop", "name": "db-creds", "generation": int64(2)},
		"spec":     map[string]any{"target": map[string]any{"name": "db"}},
		"status":   map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "SecretSyncedError"}}},
	}}
	v, ok := Judge(es)
	if !ok || v.Source.Name != "db" || v.Producer.Name != "db-creds" || v.State != Failed {
		t.Errorf("Judge = %+v, %v", v, ok)
	}
	if _, ok := Judge(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}}); ok {
		t.Error("a Deployment judged")
	}
	_ = unstructured.SetNestedField(es.Object, "None", "spec", "target", "creationPolicy")
	if _, ok := Judge(es); ok {
		t.Error("an ExternalSecret writing no Secret judged")
	}
}
