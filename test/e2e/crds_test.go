package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// hack runs a script of hack/ that builds or copies something into the
// cache, and returns the folder it prints.
func hack(t *testing.T, script string, args ...string) string {
	t.Helper()
	out, err := exec.Command("bash", append([]string{filepath.Join("..", "..", "hack", script)}, args...)...).Output()
	if err != nil {
		t.Fatalf("hack/%s: %v", script, err)
	}
	return strings.TrimSpace(string(out))
}

// installCRD creates the CRD of file, unless it is there, and waits until
// the API server serves list, the kind of the CRD's list, in ns.
func installCRD(t *testing.T, file string, list schema.GroupVersionKind, ns string) {
	t.Helper()
	createCRD(t, file)
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(list)
	NewWithT(t).Eventually(func() error { return k8s.List(ctx, l, client.InNamespace(ns)) }, wait).
		Should(Succeed(), "%s served", list.Kind)
}

// createCRD creates the CRD of file, unless it is there.
func createCRD(t *testing.T, file string) {
	t.Helper()
	r, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(r, 4096).Decode(&crd.Object); err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	if err := k8s.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create %s: %v", file, err)
	}
}
