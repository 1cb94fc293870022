package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/watcher-dev/watcher/internal/cluster"
)

// renderPinningPolicy renders the chart with pinning.enabled through the
// real helm CLI (hack/helm.sh), for the release "watcher" (whose policy
// name is watcher's --pinning-policy default), and returns its
// MutatingAdmissionPolicy and binding.
func renderPinningPolicy() ([]*unstructured.Unstructured, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(filepath.Join(root, "hack", "helm.sh")).Output()
	if err != nil {
		return nil, fmt.Errorf("hack/helm.sh: %w", err)
	}
	render := exec.Command(strings.TrimSpace(string(out)), "template", "watcher", filepath.Join(root, "deploy", "helm", "watcher"),
		"--namespace", "watcher", "--set", "pinning.enabled=true", "--show-only", "templates/pinning.yaml",
		"--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")
	var stderr bytes.Buffer
	render.Stderr = &stderr
	text, err := render.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template: %w: %s", err, stderr.String())
	}
	return mutatingPolicies(text)
}

// mutatingPolicies returns the MutatingAdmissionPolicy and its binding of
// rendered manifests, and fails unless there is one of each.
func mutatingPolicies(manifests []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	kinds := map[string]int{}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("decode rendered chart: %w", err)
		}
		switch u.GetKind() {
		case "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding":
			kinds[u.GetKind()]++
			objs = append(objs, u)
		}
	}
	if kinds["MutatingAdmissionPolicy"] != 1 || kinds["MutatingAdmissionPolicyBinding"] != 1 {
		return nil, fmt.Errorf("the chart rendered %d MutatingAdmissionPolicies and %d bindings with pinning.enabled, want 1 each",
			kinds["MutatingAdmissionPolicy"], kinds["MutatingAdmissionPolicyBinding"])
	}
	return objs, nil
}

// applyObjects creates objs, MutatingAdmissionPolicies and bindings.
func applyObjects(ctx context.Context, kube *cluster.Cluster, objs []*unstructured.Unstructured) error {
	dc, err := dynamic.NewForConfig(kube.RESTConfig())
	if err != nil {
		return fmt.Errorf("create dynamic client: %w", err)
	}
	resources := map[string]string{"MutatingAdmissionPolicy": "mutatingadmissionpolicies", "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings"}
	for _, u := range objs {
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resources[u.GetKind()]}
		if _, err := dc.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// moduleRoot walks up from the working directory to the folder of go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run the benchmark from the repository")
		}
		dir = parent
	}
}
