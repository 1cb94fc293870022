package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/test/fixture"
)

// TestDeployManifests: the RBAC in deploy/rbac.yaml is all watcher needs
// (watcher runs here with the ServiceAccount's own token, in the lease mode
// with the CronJob trigger, and does its job), and the Deployments of both lock modes and the Redis
// example are accepted by the API server.
func TestDeployManifests(t *testing.T) {
	g := NewWithT(t)
	for _, o := range manifest(t, "rbac.yaml") {
		err := k8s.Create(ctx, o)
		if !apierrors.IsAlreadyExists(err) {
			g.Expect(err).NotTo(HaveOccurred(), "create %s %s", o.GetKind(), o.GetName())
		}
	}
	for _, file := range []string{"watcher-lease.yaml", "redis.yaml", "watcher-redis.yaml"} {
		for _, o := range manifest(t, file) {
			g.Expect(k8s.Create(ctx, o, client.DryRunAll)).To(Succeed(), "%s: %s %s", file, o.GetKind(), o.GetName())
		}
	}

	ns := namespace(t)
	cm := fixture.ConfigMap(ns, "cfg", map[string]string{"a": "1"})
	create(t, cm)
	dep := fixture.Deployment(ns, "web", fixture.EnvFrom("cfg", ""))
	tr := track(t, dep)
	cj := fixture.CronJob(ns, "nightly", fixture.EnvFrom("cfg", ""))
	cjTr := track(t, cj)
	w := startWatcherEnv(t, "watcher", ns, []string{"KUBECONFIG=" + serviceAccountKubeconfig(t, "watcher", "watcher")},
		"--lease-namespace=watcher", "--lease-name="+ns, "--cronjob-trigger")
	w.WaitReady(t)
	waitAdopted(t, dep)
	waitAdopted(t, cj)
	setData(t, cm, "a", "2")
	waitRollouts(t, tr, 1)
	waitLog(t, w, "restarted Deployment "+ns+"/web")
	waitRollouts(t, cjTr, 1)
	waitJobRan(t, cj, cjTr.Rollouts()[0].RestartedFor)
	g.Expect(w.Logs.Matching("forbidden")).To(BeEmpty())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "watcher", Name: "watcher-hash-key"}, &corev1.Secret{})).To(Succeed())
}

// manifest reads the objects of deploy/<file>.
func manifest(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(o.Object) > 0 {
			out = append(out, &o)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig holding a token of the
// ServiceAccount namespace/name.
func serviceAccountKubeconfig(t *testing.T, namespace, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = namespace, name
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := k8s.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	cfg, err := clientcmd.LoadFromFile(kube.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Token, a.TokenFile, a.ClientCertificateData, a.ClientKeyData = tr.Status.Token, "", nil, nil
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
