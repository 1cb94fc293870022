package integration

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"gonum.org/v1/gonum/graph/formats/dot"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/cli"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/options"
	"github.com/watcher-dev/watcher/internal/plan"
)

// TestExplainAndGraph: watcher explain and watcher graph, run as the binary
// runs them, read a real API server after a real watcher adopted and
// restarted the workloads and stopped: a change made since is a pending
// restart, the last restart comes from its Event, the opted-out Secret is
// reported with its rule, the graph is valid DOT, and a reader who may not
// read Secrets gets a report that compares nothing rather than an error.
func TestExplainAndGraph(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ns := namespace(t)
	const password = "hunter2-integration"
	cm := configMap(ns, "app-config", map[string]string{"LOG_LEVEL": "info", "PORT": "8080"})
	sec := secret(ns, "db", map[string]string{"password": password})
	sec.Annotations = map[string]string{"require-restart": "false"}
	web := deployment(ns, "web", podSpec(corev1.Container{
		Env: []corev1.EnvVar{{Name: "LOG_LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Key: "LOG_LEVEL"}}}},
		EnvFrom: envFrom("", "db").Containers[0].EnvFrom,
	}))
	cache := statefulSet(ns, "cache", envFrom("app-config", ""))
	create(t, cm, sec, web, cache)
	w := startWatcher(t, ns, func(o *options.Options) { o.Namespace = ns })
	waitAdopted(t, web)
	waitAdopted(t, cache)
	setConfigMap(t, cm, "LOG_LEVEL", "debug")
	g.Eventually(func() int { return len(restartEvents(t, ns, "web")) }, wait).Should(Equal(1))
	w.Stop()
	setConfigMap(t, cm, "LOG_LEVEL", "warn") // watcher is not running: pending

	kubeconfig := writeKubeconfig(t)
	run := func(args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		all := append([]string{"watcher"}, args...)
		all = append(all, "-n", ns, "--kubeconfig", kubeconfig, "--watcher-namespace", ns)
		code := cli.Main(ctx, all, &out, &errOut)
		g.Expect(code).To(Equal(0), "%v: %s", args, errOut.String())
		g.Expect(out.String() + errOut.String()).NotTo(ContainSubstring(password))
		return out.String(), errOut.String()
	}

	out, _ := run("explain", "deployment/web", "-o", "json")
	var rep explain.WorkloadReport
	g.Expect(json.Unmarshal([]byte(out), &rep)).To(Succeed())
	g.Expect(rep.Record).To(Equal(explain.RecordCurrent))
	g.Expect(rep.Pending).To(BeTrue(), rep.Status)
	g.Expect(rep.Changes).To(Equal([]explain.Change{{Kind: "ConfigMap", Name: "app-config", Keys: []string{"LOG_LEVEL"}}}))
	g.Expect(rep.Restarts).To(HaveLen(1))
	g.Expect(rep.Restarts[0].Reason).To(Equal("Restarted"))
	g.Expect(rep.Restarts[0].Note).To(ContainSubstring("ConfigMap app-config changed (keys: LOG_LEVEL"))
	g.Expect(rep.Uses).To(HaveLen(2))
	g.Expect(rep.Uses[1]).To(And(
		HaveField("Name", "db"), HaveField("Verdict", "ignore"), HaveField("Rule", plan.SkipConfigOptedOut),
		HaveField("Paths", []explain.Path{{Via: "envFrom", Where: "containers[app].envFrom[0]"}}),
	))

	out, _ = run("explain", "sts/cache")
	g.Expect(out).To(ContainSubstring("Status:   restart pending because ConfigMap app-config changed (keys: LOG_LEVEL)"))
	g.Expect(out).To(MatchRegexp(`LOG_LEVEL\s+[0-9a-f]{8}\s+[0-9a-f]{8}\s+changed`))
	g.Expect(out).To(MatchRegexp(`PORT\s+([0-9a-f]{8})\s+([0-9a-f]{8})\s+same`))

	out, _ = run("explain", "configmap/app-config", "-o", "json")
	var crep explain.ConfigReport
	g.Expect(json.Unmarshal([]byte(out), &crep)).To(Succeed())
	g.Expect(crep.Keys).To(Equal([]string{"LOG_LEVEL", "PORT"}))
	g.Expect(crep.ByKey).To(Equal([]explain.KeyEffect{
		{Key: "LOG_LEVEL", Restarts: []string{"Deployment/web", "StatefulSet/cache"}},
		{Key: "PORT", Restarts: []string{"StatefulSet/cache"}},
	}))
	g.Expect(crep.NewKey).To(Equal([]string{"StatefulSet/cache"}))

	out, _ = run("graph", "-o", "dot")
	_, err := dot.ParseString(out)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`"Deployment/` + ns + `/web" -> "ConfigMap/` + ns + `/app-config" [label="LOG_LEVEL (env)"];`))
	out, _ = run("graph", "-o", "json")
	var graph explain.Graph
	g.Expect(json.Unmarshal([]byte(out), &graph)).To(Succeed())
	g.Expect(graph.Configs).To(HaveLen(2))
	g.Expect(graph.Configs[0]).To(Equal(explain.GraphConfig{Kind: "ConfigMap", Namespace: ns, Name: "app-config", State: "present",
		UsedBy: []string{"Deployment/web", "StatefulSet/cache"}}))

	// A reader who may read the workload and its ConfigMap, and nothing
	// else: no hash key, no Events.
	role := &rbacv1.Role{ObjectMeta: meta(ns, "reader"), Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta(ns, "reader"), RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "reader", APIGroup: "rbac.authorization.k8s.io"}}}
	create(t, role, binding)
	g.Eventually(func() string {
		var out, errOut bytes.Buffer
		cli.Main(ctx, []string{"watcher", "explain", "deployment/web", "-n", ns, "--kubeconfig", kubeconfig, "--watcher-namespace", ns, "--as", "reader", "-o", "json"}, &out, &errOut)
		return out.String() + errOut.String()
	}, wait).Should(And(ContainSubstring(`"action": "unknown"`), ContainSubstring("hashes not compared: cannot read the hash key Secret"),
		ContainSubstring("cannot list its Events"), Not(ContainSubstring(`"recorded"`))))
}

// restartEvents returns the Restarted Events of workload name.
func restartEvents(t *testing.T, ns, name string) []eventsv1.Event {
	t.Helper()
	return env.EventsWhere(t, ns, func(e eventsv1.Event) bool { return e.Reason == cause.ReasonRestarted && e.Regarding.Name == name })
}

// writeKubeconfig writes a kubeconfig for the test API server's admin.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: restConfig.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: restConfig.CertData, ClientKeyData: restConfig.KeyData, Token: restConfig.BearerToken}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
