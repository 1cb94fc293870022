package integration

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/cli"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
)

// installationKey is the hash key these tests give watcher.
var installationKey = []byte("an-installation-key-of-32-bytes!")

// v2KeyHash and v2KeyID are the per-key hash and the key ID of the previous
// scheme (version 2): hashes bound to their object and key, keyed with the
// installation's key itself, not with the key of their namespace.
func v2KeyHash(kind, namespace, name, key, value string) string {
	m := hmac.New(sha256.New, installationKey)
	for _, f := range []string{kind, namespace, name, key, value} {
		_, _ = m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(f))))
		_, _ = m.Write([]byte(f))
	}
	return hex.EncodeToString(m.Sum(nil))[:hash.KeyHashLen]
}

func v2KeyID() string {
	id := sha256.Sum256(append([]byte("watcher hash key id v2\x00"), installationKey...))
	return hex.EncodeToString(id[:])[:hash.KeyHashLen]
}

// ownNamespace creates the namespace of a watcher installation, next to the
// test's namespace ns, with the hash key Secret holding installationKey, and
// returns its name.
func ownNamespace(t *testing.T, ns string) string {
	t.Helper()
	own := ns + "-watcher"
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own}},
		&corev1.Secret{ObjectMeta: meta(own, options.Defaults().HashKeySecret), Data: map[string][]byte{"key": installationKey}})
	return own
}

// TestOldSchemeRecordsAreAdoptedAgain: a workload recorded by the previous
// hash scheme (the installation's key for every namespace), with the
// configuration it records still current, is adopted again by the
// per-namespace scheme: its record and key ID are rewritten, its pod
// template is not (no rollout, so no new ReplicaSet); a later data change
// restarts it.
func TestOldSchemeRecordsAreAdoptedAgain(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	own := ownNamespace(t, ns)
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	old := plan.Record{"ConfigMap/cfg": &plan.Entry{All: true, Keys: map[string]string{"a": v2KeyHash("ConfigMap", ns, "cfg", "a", "1")}}}
	dep := deployment(ns, "web", envFrom("cfg", ""))
	dep.Annotations = map[string]string{plan.RecordAnnotation: old.String(), plan.HashKeyAnnotation: v2KeyID()}
	tr := track(t, dep)

	startWatcher(t, ns, func(o *options.Options) { o.Namespace = own })
	h := hash.NewHasher(installationKey)
	g.Expect(h.ID()).NotTo(Equal(v2KeyID()))
	g.Eventually(func() string { return fetch(t, dep).Annotations[plan.HashKeyAnnotation] }, wait).Should(Equal(h.ID()))
	rec, err := plan.ParseRecord(fetch(t, dep).Annotations[plan.RecordAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	want, _ := h.OfObject(fetch(t, cm))
	g.Expect(rec["ConfigMap/cfg"].Keys).To(Equal(want.Keys))
	settled(t, dep)
	stayRollouts(t, tr, 0)
	g.Expect(events(t, ns, "web", cause.ReasonRestarted)).To(BeEmpty())

	setConfigMap(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	waitRestarted(t, ns, "web", "ConfigMap cfg changed (keys: a;")
}

// TestExplainWithNamespaceKey: the operator derives the key of namespace A
// (watcher key derive, reading the installation's key); a user of A who may
// read A's Secrets but not the installation's key gets a full report from
// watcher explain, with the key from A's Secret or given by flag: the record
// current, a change made since pending. A's key explains nothing in B.
func TestExplainWithNamespaceKey(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	a := namespace(t)
	b, own := a+"-b", ownNamespace(t, a)
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b}})
	cms := map[string]*corev1.ConfigMap{}
	for _, ns := range []string{a, b} {
		cms[ns] = configMap(ns, "cfg", map[string]string{"a": "1", "b": "1"})
		create(t, cms[ns], deployment(ns, "web", envFrom("cfg", "")))
	}
	w := startWatcher(t, a, func(o *options.Options) { o.Namespace, o.Namespaces = own, []string{a, b} })
	for _, ns := range []string{a, b} {
		waitAdopted(t, deployment(ns, "web", corev1.PodSpec{}))
	}
	w.Stop()
	setConfigMap(t, cms[a], "a", "2") // watcher is not running: pending in A

	// A user of A: the workloads, ConfigMaps and Secrets of A, nothing else.
	role := &rbacv1.Role{ObjectMeta: meta(a, "tenant"), Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta(a, "tenant"), RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "tenant", APIGroup: "rbac.authorization.k8s.io"}}}
	create(t, role, binding)

	kubeconfig := writeKubeconfig(t)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		all := append([]string{"watcher"}, args...)
		all = append(all, "--kubeconfig", kubeconfig, "--watcher-namespace", own)
		code := cli.Main(ctx, all, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	explainAsTenant := func(args ...string) explain.WorkloadReport {
		t.Helper()
		var rep explain.WorkloadReport
		code, out, errOut := run(append([]string{"explain", "deployment/web", "-n", a, "--as", "tenant", "-o", "json"}, args...)...)
		g.Expect(code).To(Equal(0), errOut)
		g.Expect(json.Unmarshal([]byte(out), &rep)).To(Succeed())
		g.Expect(rep.Notes).NotTo(ContainElement(HavePrefix("hashes not compared")))
		return rep
	}
	checkPending := func(rep explain.WorkloadReport) {
		t.Helper()
		g.Expect(rep.Record).To(Equal(explain.RecordCurrent))
		g.Expect(rep.Pending).To(BeTrue(), rep.Status)
		g.Expect(rep.Changes).To(Equal([]explain.Change{{Kind: "ConfigMap", Name: "cfg", Keys: []string{"a"}}}))
		g.Expect(rep.Uses).To(HaveLen(1))
		g.Expect(rep.Uses[0].Hashes).To(ConsistOf(
			And(HaveField("Key", "a"), HaveField("Status", "changed")),
			And(HaveField("Key", "b"), HaveField("Status", "same")),
		))
	}

	// Without A's key, the tenant gets no comparison: it cannot read the
	// installation's key.
	var out string
	g.Eventually(func(g Gomega) { // until the Role is in force
		code, stdout, errOut := run("explain", "deployment/web", "-n", a, "--as", "tenant")
		g.Expect(code).To(Equal(0), errOut)
		out = stdout
	}, wait).Should(Succeed())
	g.Expect(out).To(And(ContainSubstring("hashes not compared: cannot read the hash key Secret "+own+"/"+options.Defaults().HashKeySecret),
		ContainSubstring("nor the key of namespace "+a+": no key Secret "+a+"/watcher-explain-key")))

	// The operator derives A's key: printed, and written into A.
	code, token, errOut := run("key", "derive", "-n", a)
	g.Expect(code).To(Equal(0), errOut)
	token = strings.TrimSpace(token)
	g.Expect(token).To(HavePrefix(a + ":" + hash.NewHasher(installationKey).ID() + ":"))
	code, out, errOut = run("key", "derive", "-n", a, "--write")
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring("Secret " + a + "/watcher-explain-key holds the key of namespace " + a))
	g.Expect(out).NotTo(ContainSubstring(strings.Split(token, ":")[2]))

	checkPending(explainAsTenant()) // from A's Secret
	// Given by flag, the key needs no Secret.
	if err := k8s.Delete(ctx, &corev1.Secret{ObjectMeta: meta(a, "watcher-explain-key")}); err != nil {
		t.Fatal(err)
	}
	checkPending(explainAsTenant("--explain-key", token))
	code, tokenB, errOut := run("key", "derive", "-n", b)
	g.Expect(code).To(Equal(0), errOut)

	// A's key does not explain B; B's key does not explain A.
	code, _, errOut = run("explain", "deployment/web", "-n", b, "--explain-key", token)
	g.Expect(code).To(Equal(1))
	g.Expect(errOut).To(ContainSubstring("is the key of namespace " + a + ", not of " + b))
	code, _, errOut = run("explain", "deployment/web", "-n", a, "--explain-key", strings.TrimSpace(tokenB))
	g.Expect(code).To(Equal(1))
	g.Expect(errOut).To(ContainSubstring("is the key of namespace " + b + ", not of " + a))

	// B, unchanged, is current with B's key: nothing pending.
	code, out, errOut = run("explain", "deployment/web", "-n", b, "--explain-key", strings.TrimSpace(tokenB), "-o", "json")
	g.Expect(code).To(Equal(0), errOut)
	var rep explain.WorkloadReport
	g.Expect(json.Unmarshal([]byte(out), &rep)).To(Succeed())
	g.Expect(rep.Record).To(Equal(explain.RecordCurrent))
	g.Expect(rep.Action).To(Equal("none"), rep.Status)
	g.Expect(rep.Pending).To(BeFalse())
	g.Expect(rep.Uses[0].Hashes).To(HaveEach(HaveField("Status", "same")))
}
