package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/sealed"
	"github.com/watcher-dev/watcher/test/fixture"
)

// TestSealedSecretsController: Bitnami's own sealed-secrets controller
// (built from its Go module by hack/sealed-secrets.sh) runs with an
// in-cluster configuration; a Secret sealed with its kubeseal is applied
// as a SealedSecret, the controller makes the Secret, and a Deployment
// uses it. A new value is sealed and applied: watcher reports the
// SealedSecret's update, and restarts the Deployment once, naming the
// SealedSecret its Secret came from.
func TestSealedSecretsController(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	bin := sealedSecretsBins(t)
	installSealedCRD(t, ns)
	startSealedSecrets(t, bin, ns)
	cert := sealingCert(t, ns)

	w := startWatcher(t, "watcher", ns)
	w.WaitReady(t)
	// Only the leader reports SealedSecrets (a standby's informers run
	// too): what changes before it leads is not reported.
	waitLeader(t, []*proc{w})
	applySealed(t, seal(t, bin, cert, ns, "db", "first value"))
	waitEvent(t, ns, "db", sealed.ReasonCreated, "SealedSecret created, keys: password")
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}
	g.Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(sec), sec) }, wait).Should(Succeed(), "the controller makes the Secret")
	g.Expect(sealed.Owner(sec)).To(Equal("db"), "the Secret is owned by its SealedSecret")
	g.Expect(string(sec.Data["password"])).To(Equal("first value"))

	dep := fixture.Deployment(ns, "web", fixture.EnvFrom("", "db"))
	tr := track(t, dep)
	waitAdopted(t, dep)

	applySealed(t, seal(t, bin, cert, ns, "db", "second value"))
	waitEvent(t, ns, "db", sealed.ReasonUpdated, "SealedSecret updated, keys: password")
	waitRollouts(t, tr, 1)
	waitRestarted(t, ns, "web", "Secret db (from SealedSecret db) changed (keys: password;")
	g.Expect(string(get(t, sec).Data["password"])).To(Equal("second value"))
	stayRollouts(t, tr, 1, quietE2E)
	for _, l := range w.Logs.Matching("db") {
		g.Expect(l).NotTo(Or(ContainSubstring("first value"), ContainSubstring("second value")), "a log line shows a value")
	}
	t.Logf("%s", restartLines(w, "Deployment"))
}

// quietE2E is how long the test looks for a second rollout that must not
// come.
const quietE2E = 2 * time.Second

// sealedSecretsBins builds the sealed-secrets controller and kubeseal if
// needed and returns their folder.
func sealedSecretsBins(t *testing.T) string { return hack(t, "sealed-secrets.sh") }

// installSealedCRD creates Bitnami's SealedSecret CRD, which hack/crds.sh
// copies out of the sealed-secrets module, unless it is there, and waits
// until it is served.
func installSealedCRD(t *testing.T, ns string) {
	t.Helper()
	installCRD(t, filepath.Join(hack(t, "crds.sh", "sealed-secrets"), "sealedsecret-crd.yaml"),
		sealed.GVK.GroupVersion().WithKind("SealedSecretList"), ns)
}

// startSealedSecrets runs the sealed-secrets controller for namespace ns
// until the test ends. The controller reads only the in-cluster
// configuration (rest.InClusterConfig: a token and CA at
// /var/run/secrets/kubernetes.io/serviceaccount and
// KUBERNETES_SERVICE_HOST/PORT). It gets one in a private mount namespace
// (unshare; as root, or through a user namespace otherwise): a tmpfs over
// /run (/var/run is /run) holding a bind mount of a folder with a token of
// its own ServiceAccount and the API server's CA. Nothing changes outside
// that namespace.
func startSealedSecrets(t *testing.T, bin, ns string) {
	t.Helper()
	sa := serviceAccountDir(t, ns)
	host, port, _ := strings.Cut(strings.TrimPrefix(kube.APIServerURL, "https://"), ":")
	const script = `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
mount --bind "$SA_DIR" /run/secrets/kubernetes.io/serviceaccount
exec "$CONTROLLER" "$@"`
	unshare := []string{"--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		unshare = append([]string{"--user", "--map-root-user"}, unshare...)
	}
	args := append(unshare, "sh", "-c", script, "sh",
		"--key-size=2048", "--all-namespaces=false", "--key-renew-period=0",
		"--listen-addr="+fixture.FreeAddr(t), "--listen-metrics-addr="+fixture.FreeAddr(t))
	cmd := exec.Command("unshare", args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "SA_DIR=" + sa, "CONTROLLER=" + filepath.Join(bin, "controller"),
		"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port, "POD_NAMESPACE=" + ns}
	runUntilCleanup(t, "the sealed-secrets controller", cmd)
}

// serviceAccountDir makes a ServiceAccount for the controller in ns, bound
// to cluster-admin, and writes the files of its in-cluster configuration
// (token, ca.crt, namespace) into a folder.
func serviceAccountDir(t *testing.T, ns string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sealed-secrets-controller"}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "sealed-secrets-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa.Name}},
	}
	create(t, sa, crb)
	t.Cleanup(func() { _ = k8s.Delete(ctx, crb) })
	cs, err := kubernetes.NewForConfig(kube.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of the controller's ServiceAccount: %v", err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"token": []byte(tok.Status.Token), "ca.crt": kube.RESTConfig().CAData, "namespace": []byte(ns),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func ptrTo[T any](v T) *T { return &v }

// sealingCert waits for the controller's sealing key in ns and writes its
// certificate to a file, for kubeseal --cert.
func sealingCert(t *testing.T, ns string) string {
	t.Helper()
	var cert []byte
	NewWithT(t).Eventually(func() int {
		var list corev1.SecretList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), client.HasLabels{"sealedsecrets.bitnami.com/sealed-secrets-key"}); err != nil {
			return 0
		}
		if len(list.Items) > 0 {
			cert = list.Items[0].Data["tls.crt"]
		}
		return len(cert)
	}, wait).ShouldNot(BeZero(), "the controller makes its sealing key")
	path := filepath.Join(t.TempDir(), "cert.pem")
	if err := os.WriteFile(path, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// seal seals a Secret name of ns holding password=value with kubeseal,
// offline (with the controller's certificate), and returns the
// SealedSecret.
func seal(t *testing.T, bin, cert, ns, name, value string) *unstructured.Unstructured {
	t.Helper()
	in, _ := json.Marshal(&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string][]byte{"password": []byte(value)},
	})
	cmd := exec.Command(filepath.Join(bin, "kubeseal"), "--cert", cert, "--format", "json")
	cmd.Env = []string{"KUBECONFIG=" + kube.Kubeconfig, "HOME=" + t.TempDir()}
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubeseal: %v\n%s", err, stderr.String())
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(out, &u.Object); err != nil {
		t.Fatalf("kubeseal's output: %v\n%s", err, out)
	}
	return u
}

// applySealed creates the SealedSecret, or replaces the spec of the one
// there, as a pipeline applying it would.
func applySealed(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	cur := u.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(u), cur); err != nil {
			return k8s.Create(ctx, u.DeepCopy(), client.FieldOwner("pipeline"))
		}
		cur.Object["spec"] = u.Object["spec"]
		return k8s.Update(ctx, cur, client.FieldOwner("pipeline"))
	})
	if err != nil {
		t.Fatalf("apply SealedSecret %s: %v", u.GetName(), err)
	}
}
