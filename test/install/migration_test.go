package install

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/restart"
	"github.com/watcher-dev/watcher/internal/settings"
)

// reloaderAuto is Reloader's opt-in of a workload.
var reloaderAuto = map[string]string{"reloader.stakater.com/auto": "true"}

// TestMigrationCommand installs the chart as the README's "Migrating from
// Reloader" section says, with helm install and its
// --set-json 'extraArgs=[...]' read from the README, then runs watcher as
// the release's Deployment says (its arguments and environment, a token
// of its ServiceAccount) and checks that it behaves as Reloader with those
// arguments, by the cluster's state:
//
//	extraArgs                     what the cluster shows
//	the README's                  only the Deployment annotated
//	                              reloader.stakater.com/auto restarts (new
//	                              ReplicaSets), not the one without; the
//	                              ignored namespaces are only those given:
//	                              kube-system's ConfigMaps are ignored,
//	                              istio-system's (ignored by watcher's own
//	                              default) are not; the published settings
//	                              say annotated and kube-system
//	--reload-strategy=env-vars    the restart is an env var on the
//	                              containers, not the annotation
//	--enable-csi-integration      the published settings say CSI is on,
//	                              and the release's RBAC has the CSI rules
//	--webhook-url                 each change is one JSON POST to the URL,
//	                              an Event WouldRestart, and no rollout
func TestMigrationCommand(t *testing.T) {
	readme := readmeExtraArgs(t)

	t.Run("the README's command", func(t *testing.T) {
		g := NewWithT(t)
		m := installMigration(t, "mig-readme", readme)
		g.Expect(rules(g, m.objs, "ClusterRole")).NotTo(ContainElement(ContainSubstring("secrets-store")), "no CSI rules without --enable-csi-integration")
		apps := namespace(t, "mig-readme-apps", nil)
		plain := newNamedApp(t, apps, "plain", "plain", nil)
		opted := newNamedApp(t, apps, "opted", "opted", reloaderAuto)
		istio := newNamedApp(t, systemNamespace(t, "istio-system"), "mig-opted", "mig-opted", reloaderAuto)
		kubeSystem := newNamedApp(t, systemNamespace(t, "kube-system"), "mig-opted", "mig-opted", reloaderAuto)
		w := m.start(t)
		opted.waitAdopted(t)
		istio.waitAdopted(t)

		s := m.settings(t)
		g.Expect(s).To(HaveKeyWithValue("discovery", plan.DiscoveryAnnotated))
		g.Expect(s).To(HaveKeyWithValue("ignoreConfigMapNamespaces", ConsistOf("kube-system")))
		g.Expect(s).To(HaveKeyWithValue("ignoreSecretNamespaces", ConsistOf("kube-system")))

		for _, a := range []*app{plain, opted, istio, kubeSystem} {
			a.change(t, "2")
		}
		opted.waitRollouts(t, 1)
		istio.waitRollouts(t, 1)
		plain.stayRollouts(t, 0, 2*time.Second)
		kubeSystem.stayRollouts(t, 0, time.Second)
		// --reload-strategy=annotations: watcher's annotation strategy.
		g.Expect(get(t, opted.dep).Spec.Template.Annotations).To(HaveKey(plan.RestartAnnotation))
		noForbidden(t, w)
	})

	t.Run("--reload-strategy=env-vars", func(t *testing.T) {
		g := NewWithT(t)
		m := installMigration(t, "mig-env", `extraArgs=["--reload-strategy=env-vars"]`)
		opted := newNamedApp(t, namespace(t, "mig-env-apps", nil), "opted", "opted", reloaderAuto)
		w := m.start(t)
		opted.waitAdopted(t)
		opted.change(t, "2")
		opted.waitRollouts(t, 1)
		tmpl := get(t, opted.dep).Spec.Template
		g.Expect(tmpl.Annotations).NotTo(HaveKey(plan.RestartAnnotation))
		for _, c := range tmpl.Spec.Containers {
			g.Expect(c.Env).To(ContainElement(HaveField("Name", restart.EnvName)), "container %s", c.Name)
		}
		noForbidden(t, w)
	})

	t.Run("--enable-csi-integration", func(t *testing.T) {
		g := NewWithT(t)
		m := installMigration(t, "mig-csi", `extraArgs=["--enable-csi-integration"]`)
		g.Expect(rules(g, m.objs, "ClusterRole")).To(ContainElement("secrets-store.csi.x-k8s.io/secretproviderclasspodstatuses: get,list,watch"))
		g.Expect(allowed(t, m.ns, m.fullname, authorizationv1.ResourceAttributes{Verb: "watch", Group: "secrets-store.csi.x-k8s.io", Resource: "secretproviderclasspodstatuses"})).
			To(BeTrue(), "the ServiceAccount may watch the CSI driver's pod statuses in every namespace")
		w := m.start(t)
		g.Expect(m.settings(t)).To(HaveKeyWithValue("csi", true), "the published settings say CSI is on")
		noForbidden(t, w)
	})

	t.Run("--webhook-url", func(t *testing.T) {
		g := NewWithT(t)
		hook := newHook(t)
		m := installMigration(t, "mig-hook", `extraArgs=["--webhook-url=`+hook.URL+`/reload"]`)
		apps := namespace(t, "mig-hook-apps", nil)
		opted := newNamedApp(t, apps, "opted", "opted", reloaderAuto)
		w := m.start(t)
		// Nothing is posted at start (watcher adopts the Deployment in
		// memory: with --webhook-url it writes nothing, not even its
		// record).
		g.Consistently(hook.count, 2*time.Second, 100*time.Millisecond).Should(BeZero(), "posts at start")
		for i, v := range []string{"2", "3"} {
			opted.change(t, v)
			g.Eventually(hook.count, wait, 50*time.Millisecond).Should(Equal(i+1), "one post per change")
			var body struct {
				Event    string `json:"event"`
				DryRun   bool   `json:"dryRun"`
				Workload struct{ Kind, Namespace, Name string }
			}
			g.Expect(json.Unmarshal(hook.body(i), &body)).To(Succeed(), "a JSON body: %s", hook.body(i))
			g.Expect(body.Event).To(Equal("restart"))
			g.Expect(body.DryRun).To(BeTrue())
			g.Expect(body.Workload.Kind + " " + body.Workload.Namespace + "/" + body.Workload.Name).To(Equal("Deployment " + apps + "/opted"))
			opted.stayRollouts(t, 0, 2*time.Second)
			g.Expect(hook.count()).To(Equal(i+1), "one post per change")
		}
		g.Expect(wouldRestart(t, opted.dep)).To(Equal(2), "an Event WouldRestart per change")
		_, hashKey := opted.record(t)
		g.Expect(hashKey).To(BeEmpty(), "nothing is written on the workload")
		noForbidden(t, w)
	})
}

// readmeExtraArgs returns the --set-json value of the command of the
// README's section "Migrating from Reloader": extraArgs=[...].
func readmeExtraArgs(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Migrating from Reloader\n")
	if !ok {
		t.Fatal(`README.md has no section "Migrating from Reloader"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile(`--set-json '(extraArgs=\[[^']*\])'`).FindStringSubmatch(section)
	if m == nil {
		t.Fatal(`the README's "Migrating from Reloader" has no helm command with --set-json 'extraArgs=[...]'`)
	}
	return m[1]
}

// migration is a release of the chart installed with extraArgs.
type migration struct {
	ns, fullname string
	objs         []*unstructured.Unstructured
	d            *appsv1.Deployment
}

// installMigration installs the chart as release in a namespace of that
// name (restricted) with helm install --set-json setJSON
// ("extraArgs=[...]"), until its pod is ready; the release's container
// has exactly those arguments.
func installMigration(t *testing.T, release, setJSON string) *migration {
	t.Helper()
	g := NewWithT(t)
	ns := namespace(t, release, restricted)
	mustHelm(t, "install", release, chart, "-n", ns, "--wait", "--timeout=60s", "--set-json", setJSON)
	t.Cleanup(func() { _, _ = helm(t, "uninstall", release, "-n", ns, "--wait") })
	m := &migration{ns: ns, fullname: release + "-watcher"}
	m.objs = decode(t, []byte(mustHelm(t, "get", "manifest", release, "-n", ns)))
	m.d = deployment(t, m.objs)
	var want []string
	g.Expect(json.Unmarshal([]byte(strings.TrimPrefix(setJSON, "extraArgs=")), &want)).To(Succeed())
	g.Expect(m.d.Spec.Template.Spec.Containers[0].Args).To(Equal(want), "the container's arguments")
	g.Expect(readyPods(t, ns)).To(Equal(1))
	return m
}

// start runs watcher as the release's Deployment says, with a token of
// its ServiceAccount.
func (m *migration) start(t *testing.T) *proc {
	t.Helper()
	return startWatcher(t, watcherBin, m.d, tokenKubeconfig(t, m.ns, m.fullname), nil)
}

// settings returns the settings the release's watcher publishes, once
// published.
func (m *migration) settings(t *testing.T) map[string]any {
	t.Helper()
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: m.ns, Name: settings.ConfigMapName(m.fullname)}
	NewWithT(t).Eventually(func() error { return k8s.Get(ctx, key, cm) }, wait, 100*time.Millisecond).Should(Succeed(), "settings published")
	out := map[string]any{}
	if err := json.Unmarshal([]byte(cm.Data[settings.DataKey]), &out); err != nil {
		t.Fatalf("settings %s: %v", key, err)
	}
	return out
}

// systemNamespace returns the namespace name, created (and deleted when
// the test ends) unless it exists, as kube-system does.
func systemNamespace(t *testing.T, name string) string {
	t.Helper()
	err := k8s.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
	switch {
	case apierrors.IsNotFound(err):
		return namespace(t, name, nil)
	case err != nil:
		t.Fatal(err)
	}
	// Not deleted with its namespace: the test's objects are.
	t.Cleanup(func() {
		for _, o := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "mig-opted"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "mig-opted"}},
		} {
			_ = k8s.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}
	})
	return name
}

// allowed asks the API server (a SubjectAccessReview) whether the
// ServiceAccount ns/sa may do what attrs say.
func allowed(t *testing.T, ns, sa string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + sa,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &attrs,
	}}
	if err := k8s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

// wouldRestart counts the Events WouldRestart of the Deployment d.
func wouldRestart(t *testing.T, d *appsv1.Deployment) int {
	t.Helper()
	var l eventsv1.EventList
	if err := k8s.List(ctx, &l, client.InNamespace(d.Namespace)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range l.Items {
		if e.Reason != "WouldRestart" || e.Regarding.Name != d.Name {
			continue
		}
		if e.Series != nil { // repeats of one Event
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}

// hook is a local webhook receiver: it keeps the body of every POST.
type hook struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newHook(t *testing.T) *hook {
	t.Helper()
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost {
			h.mu.Lock()
			h.bodies = append(h.bodies, b)
			h.mu.Unlock()
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bodies)
}

func (h *hook) body(i int) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bodies[i]
}
