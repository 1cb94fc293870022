package integration

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/workload"
)

// kubectlTimeout bounds every kubectl run; on this API server one takes
// well under a second.
const kubectlTimeout = 30 * time.Second

// applyMode is how the user's GitOps tool applies manifests.
type applyMode struct {
	name string
	args []string
}

var (
	clientSideApply = applyMode{"client-side", []string{"apply"}}
	serverSideApply = applyMode{"server-side", []string{"apply", "--server-side"}}
)

// TestGitOps: after watcher restarted a workload, re-applying the user's
// unchanged manifest with kubectl (client-side or server-side apply) rolls
// nothing and keeps what watcher wrote, so the next change of the
// ConfigMap rolls the workload exactly once, and so on. Each mode runs with
// a manifest without pod-template annotations and with some of its own.
func TestGitOps(t *testing.T) {
	t.Parallel()
	kc := newKubectl(t)
	for _, mode := range []applyMode{clientSideApply, serverSideApply} {
		for _, annotated := range []bool{false, true} {
			name := mode.name
			var annotations map[string]string
			if annotated {
				name += "/template-annotations"
				annotations = map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"}
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testReapply(t, kc, mode, annotations)
			})
		}
	}
}

// testReapply runs the GitOps sequence of TestGitOps for one apply mode and
// one set of pod-template annotations of the manifest.
func testReapply(t *testing.T, kc *kubectl, mode applyMode, podAnnotations map[string]string) {
	g := NewWithT(t)
	ns := namespace(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Deployment %s/web with its managed fields:\n%s", ns, kc.output(t, "-n", ns, "get", "deployment", "web", "-o", "yaml", "--show-managed-fields"))
		}
	})
	cm := configMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	file := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(file, []byte(deploymentManifest(podAnnotations)), 0o600); err != nil {
		t.Fatal(err)
	}
	apply := func() {
		t.Logf("kubectl %s: %s", mode.name, kc.run(t, append(append([]string{"-n", ns}, mode.args...), "-f", file)...))
	}
	dep := &appsv1.Deployment{ObjectMeta: meta(ns, "web")}
	revs := watchRevisions(t, ns, "web")

	// The user's first apply creates the Deployment; watcher adopts it.
	apply()
	revs.waitSeen(t)
	startWatcher(t, ns)
	waitAdopted(t, dep)
	revs.stay(t, 0)

	// A change of the ConfigMap rolls it once.
	setConfigMap(t, cm, "a", "2")
	revs.wait(t, 1)
	revs.stay(t, 1)

	// The GitOps tool applies the same manifest again: nothing rolls and
	// watcher's annotations stay as they were.
	before := fetch(t, dep).DeepCopy()
	apply()
	revs.stay(t, 1)
	after := fetch(t, dep)
	expectWatcherAnnotationsKept(g, before, after)

	// The next change rolls it exactly once more, and a further re-apply
	// rolls nothing again.
	setConfigMap(t, cm, "a", "3")
	revs.wait(t, 2)
	revs.stay(t, 2)
	before = fetch(t, dep).DeepCopy()
	apply()
	revs.stay(t, 2)
	after = fetch(t, dep)
	expectWatcherAnnotationsKept(g, before, after)

	// In all, two template revisions, both watcher's restarts, each for a
	// configuration of its own; the manifest's own annotations are intact.
	restarts := revs.restartedFor()
	g.Expect(restarts).To(HaveLen(2), "template revisions of Deployment %s/web", ns)
	g.Expect(restarts[0]).NotTo(BeEmpty(), "first revision is not watcher's restart")
	g.Expect(restarts[1]).NotTo(BeEmpty(), "second revision is not watcher's restart")
	g.Expect(restarts[1]).NotTo(Equal(restarts[0]), "both revisions restart for the same configuration")
	g.Expect(after.Spec.Template.Annotations).To(HaveKeyWithValue(plan.RestartAnnotation, restarts[1]))
	for k, v := range podAnnotations {
		g.Expect(after.Spec.Template.Annotations).To(HaveKeyWithValue(k, v), "the manifest's own pod-template annotation")
	}
}

// expectWatcherAnnotationsKept checks that a re-apply between before and
// after left watcher's record, hash key and restart annotation as they were.
// An unchanged manifest must not even write: a write that removed watcher's
// record would be repaired by a new adoption within the quiet period, and
// only the resourceVersion would tell.
func expectWatcherAnnotationsKept(g Gomega, before, after *appsv1.Deployment) {
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the re-apply of the unchanged manifest wrote to the Deployment")
	for _, k := range []string{plan.RecordAnnotation, plan.HashKeyAnnotation} {
		g.Expect(before.Annotations).To(HaveKey(k))
		g.Expect(after.Annotations).To(HaveKeyWithValue(k, before.Annotations[k]), "workload annotation after re-apply")
	}
	g.Expect(before.Spec.Template.Annotations).To(HaveKey(plan.RestartAnnotation))
	g.Expect(after.Spec.Template.Annotations).To(HaveKeyWithValue(plan.RestartAnnotation, before.Spec.Template.Annotations[plan.RestartAnnotation]),
		"pod-template annotation after re-apply")
	g.Expect(after.Spec.Template).To(Equal(before.Spec.Template), "pod template after re-apply")
}

// deploymentManifest is the user's manifest, as kept in Git: a Deployment
// reading every key of ConfigMap cfg, with podAnnotations on its pod
// template. It has no namespace; kubectl is given one.
func deploymentManifest(podAnnotations map[string]string) string {
	var b strings.Builder
	b.WriteString(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
`)
	if len(podAnnotations) > 0 {
		b.WriteString("      annotations:\n")
		keys := make([]string, 0, len(podAnnotations))
		for k := range podAnnotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "        %s: %q\n", k, podAnnotations[k])
		}
	}
	b.WriteString(`    spec:
      containers:
      - name: app
        image: registry.example/app:1
        envFrom:
        - configMapRef:
            name: cfg
`)
	return b.String()
}

// kubectl runs the real kubectl binary of the control plane against the
// test API server.
type kubectl struct {
	bin, kubeconfig, cacheDir string
}

// newKubectl finds kubectl in the control-plane folder
// ($KUBEBUILDER_ASSETS, else what hack/controlplane-bins.sh builds) and
// writes a kubeconfig for it from restConfig.
func newKubectl(t *testing.T) *kubectl {
	t.Helper()
	dir, err := binDir()
	if err != nil {
		t.Fatalf("find kubectl: %v", err)
	}
	bin := filepath.Join(dir, "kubectl")
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("no executable kubectl at %s (%v): hack/controlplane-bins.sh builds it", bin, err)
	}
	tmp := t.TempDir()
	kc := &kubectl{bin: bin, kubeconfig: filepath.Join(tmp, "kubeconfig"), cacheDir: filepath.Join(tmp, "cache")}
	if err := clientcmd.WriteToFile(*kubeconfigFor(restConfig), kc.kubeconfig); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return kc
}

// kubeconfigFor returns a kubeconfig with the server and credentials of cfg.
func kubeconfigFor(cfg *rest.Config) *clientcmdapi.Config {
	server := cfg.Host
	if !strings.Contains(server, "://") {
		scheme := "https://"
		if !rest.IsConfigTransportTLS(*cfg) {
			scheme = "http://"
		}
		server = scheme + server
	}
	const name = "integration"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile,
		Token: cfg.BearerToken, Username: cfg.Username, Password: cfg.Password,
	}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return kc
}

// run runs kubectl with args and returns its output; it fails the test if
// kubectl fails or takes longer than kubectlTimeout.
func (k *kubectl) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.exec(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// output runs kubectl with args and returns what it printed, or why it
// failed; for diagnostics, in cleanups.
func (k *kubectl) output(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.exec(args...)
	if err != nil {
		return fmt.Sprintf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (k *kubectl) exec(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir}, args...)...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", kubectlTimeout, err)
	}
	return strings.TrimSpace(string(out)), err
}

// revisions records the changes of one Deployment's pod template, the way
// observe.Tracker does for workloads a test creates itself: envtest runs no
// deployment controller, so there are no ReplicaSets to count, and
// metadata.generation also moves with annotations. Here kubectl creates the
// Deployment, so the watch starts before it exists; the first template seen
// is the one the user applied, every later change is a revision.
type revisions struct {
	name string

	mu       sync.Mutex
	seen     bool
	last     string
	restarts []string // watcher.dev/restarted-for of each revision
}

// watchRevisions starts recording the template revisions of Deployment
// ns/name until the test ends.
func watchRevisions(t *testing.T, ns, name string) *revisions {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	list, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatalf("list deployments: %v", err)
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = sel
		return cs.AppsV1().Deployments(ns).Watch(ctx, o)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
	if err != nil {
		t.Fatalf("watch deployment %s/%s: %v", ns, name, err)
	}
	r := &revisions{name: "Deployment " + ns + "/" + name}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				r.observe(d)
			}
		}
	}()
	return r
}

func (r *revisions) observe(d *appsv1.Deployment) {
	tmpl, err := workload.PodTemplate(d)
	if err != nil {
		return
	}
	b, _ := json.Marshal(tmpl)
	sum := sha256.Sum256(b)
	h := string(sum[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen && r.last != h {
		r.restarts = append(r.restarts, tmpl.Annotations[plan.RestartAnnotation])
	}
	r.seen, r.last = true, h
}

// count returns the number of revisions seen, or an error until the
// Deployment itself has been seen.
func (r *revisions) count() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen {
		return 0, errors.New("not seen yet")
	}
	return len(r.restarts), nil
}

// restartedFor returns the restart annotation of every revision so far.
func (r *revisions) restartedFor() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.restarts...)
}

// waitSeen waits until the watch has delivered the Deployment.
func (r *revisions) waitSeen(t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(r.count, wait, 10*time.Millisecond).Should(BeNumerically(">=", 0), "%s never seen", r.name)
}

// wait waits until the Deployment's template has n revisions.
func (r *revisions) wait(t *testing.T, n int) {
	t.Helper()
	NewWithT(t).Eventually(r.count, wait, 10*time.Millisecond).Should(Equal(n), "template revisions of %s", r.name)
}

// stay checks that the Deployment's template stays at n revisions for a
// while.
func (r *revisions) stay(t *testing.T, n int) {
	t.Helper()
	NewWithT(t).Consistently(r.count, quiet, 20*time.Millisecond).Should(Equal(n), "template revisions of %s", r.name)
}
