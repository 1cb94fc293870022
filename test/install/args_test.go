package install

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestTemplateArgs: the rights the chart grants follow the flags of
// extraArgs that need them, in every form watcher reads (--flag=value,
// --flag value, a boolean alone), watcher's own flag winning over
// Reloader's, and a flag winning over the value that sets its environment
// variable: a Reloader Deployment's arguments copied into extraArgs need
// no value set beside them.
func TestTemplateArgs(t *testing.T) {
	const (
		csi      = "secrets-store.csi.x-k8s.io/secretproviderclasspodstatuses: get,list,watch"
		jobs     = "batch/jobs: get,list,watch,patch,create,delete"
		trigger  = "batch/jobs: create,get,delete"
		eviction = "pods/eviction: create"
		nsRule   = "namespaces: list,watch"
	)
	for _, tc := range []struct {
		name      string
		extraArgs []string
		values    []string // other arguments of helm template
		kind      string   // of the role checked; ClusterRole if empty
		want      []string // rules the role has
		not       []string // substrings no rule of the role has
	}{
		{name: "no arguments", want: []string{jobs}, not: []string{"secrets-store", eviction, nsRule}},
		{name: "--enable-csi-integration", extraArgs: []string{"--enable-csi-integration"}, want: []string{csi, "pods: get", "apps/replicasets: get"}},
		{name: "--enable-csi-integration=true", extraArgs: []string{"--enable-csi-integration=true"}, want: []string{csi}},
		{name: "--enable-csi-integration true", extraArgs: []string{"--enable-csi-integration", "true"}, want: []string{csi}},
		{name: "--enable-csi-integration, then another flag", extraArgs: []string{"--enable-csi-integration", "--auto-reload-all"}, want: []string{csi}},
		{name: "--enable-csi-integration=false", extraArgs: []string{"--enable-csi-integration=false"}, not: []string{"secrets-store"}},
		{name: "--enable-csi-integration false", extraArgs: []string{"--enable-csi-integration", "false"}, not: []string{"secrets-store"}},
		{name: "csi.enabled and --enable-csi-integration=false", extraArgs: []string{"--enable-csi-integration=false"}, values: []string{"--set", "csi.enabled=true"}, want: []string{csi}},
		{name: "watcher's --csi", extraArgs: []string{"--csi"}, want: []string{csi}},
		{name: "watcher's --csi=false wins over Reloader's flag", extraArgs: []string{"--csi=false", "--enable-csi-integration"}, not: []string{"secrets-store"}},
		{name: "watcher's --csi=false wins over csi.enabled", extraArgs: []string{"--csi=false"}, values: []string{"--set", "csi.enabled=true"}, not: []string{"secrets-store"}},
		{name: "--enable-csi-integration, namespaced", extraArgs: []string{"--enable-csi-integration"}, values: []string{"-f", filepath.Join(chart, "examples", "namespaced.yaml")}, kind: "Role", want: []string{csi}},
		{name: "--ignored-workload-types=jobs", extraArgs: []string{"--ignored-workload-types=jobs"}, not: []string{"batch/jobs"}},
		{name: "--ignored-workload-types jobs,cronjobs", extraArgs: []string{"--ignored-workload-types", "jobs,cronjobs"}, not: []string{"batch/jobs"}},
		{name: "--ignored-workload-types=cronjobs", extraArgs: []string{"--ignored-workload-types=cronjobs"}, want: []string{jobs}},
		{name: "--ignored-workload-types=cronjobs over discovery.ignoreWorkloadKinds Job", extraArgs: []string{"--ignored-workload-types=cronjobs"}, values: []string{"--set", "discovery.ignoreWorkloadKinds={Job}"}, want: []string{jobs}},
		{name: "--ignored-workload-types=jobs and --cronjob-trigger", extraArgs: []string{"--ignored-workload-types=jobs", "--cronjob-trigger"}, want: []string{trigger}, not: []string{jobs}},
		{name: "--ignored-workload-types=jobs and restart.cronjobTrigger", extraArgs: []string{"--ignored-workload-types=jobs"}, values: []string{"--set", "restart.cronjobTrigger=true"}, want: []string{trigger}},
		{name: "--cronjob-trigger=false over restart.cronjobTrigger", extraArgs: []string{"--ignored-workload-types=jobs", "--cronjob-trigger=false"}, values: []string{"--set", "restart.cronjobTrigger=true"}, not: []string{"batch/jobs"}},
		{name: "watcher's --ignore-workload-kinds=Job,CronJob", extraArgs: []string{"--ignore-workload-kinds=Job,CronJob"}, not: []string{"batch/jobs"}},
		{name: "watcher's --ignore-workload-kinds wins over Reloader's flag", extraArgs: []string{"--ignore-workload-kinds=CronJob", "--ignored-workload-types=jobs"}, want: []string{jobs}},
		{name: "--restart-strategy=evict", extraArgs: []string{"--restart-strategy=evict"}, want: []string{eviction, "pods: list"}},
		{name: "--restart-strategy env over restart.strategy evict", extraArgs: []string{"--restart-strategy", "env"}, values: []string{"--set", "restart.strategy=evict"}, not: []string{eviction}},
		{name: `--namespace-selector="team:a"`, extraArgs: []string{`--namespace-selector="team:a"`}, want: []string{nsRule}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b, err := json.Marshal(tc.extraArgs)
			g.Expect(err).NotTo(HaveOccurred())
			objs := render(t, "args", "args", append([]string{"--set-json", "extraArgs=" + string(b)}, tc.values...)...)
			if tc.extraArgs != nil {
				g.Expect(deployment(t, objs).Spec.Template.Spec.Containers[0].Args).To(Equal(tc.extraArgs))
			}
			kind := tc.kind
			if kind == "" {
				kind = "ClusterRole"
			}
			got := rules(g, objs, kind)
			for _, r := range tc.want {
				g.Expect(got).To(ContainElement(r))
			}
			for _, r := range tc.not {
				g.Expect(got).NotTo(ContainElement(ContainSubstring(r)))
			}
		})
	}
}

// TestKubeVersions: the chart renders for every Kubernetes from its
// kubeVersion on, and its ValidatingAdmissionPolicy only where the API
// server serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy
// (1.30 and later): on 1.29 (which serves v1beta1 at most) the chart
// installs without it. Below its kubeVersion, helm refuses the chart. The
// chart's README states both versions.
func TestKubeVersions(t *testing.T) {
	const served = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"
	for _, tc := range []struct {
		name   string
		args   []string
		policy bool
	}{
		{"1.25, the oldest", []string{"--kube-version", "1.25.0"}, false},
		{"1.29", []string{"--kube-version", "1.29.0"}, false},
		{"1.29 serving v1beta1", []string{"--kube-version", "1.29.0", "--api-versions", "admissionregistration.k8s.io/v1beta1/ValidatingAdmissionPolicy"}, false},
		{"1.30", []string{"--kube-version", "1.30.0", "--api-versions", served}, true},
		{"a provider's 1.31", []string{"--kube-version", "v1.31.2-gke.1000", "--api-versions", served}, true},
		{"admission policies off", []string{"--kube-version", "1.30.0", "--api-versions", served, "--set", "rbac.admissionPolicies=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := render(t, "kv", "kv", tc.args...)
			g.Expect(find(objs, "Deployment", "kv-watcher")).To(HaveLen(1))
			g.Expect(find(objs, "ClusterRole", "kv-watcher")).To(HaveLen(1))
			n := 0
			if tc.policy {
				n = 1
			}
			g.Expect(find(objs, "ValidatingAdmissionPolicy", "kv-watcher-creates")).To(HaveLen(n))
			g.Expect(find(objs, "ValidatingAdmissionPolicyBinding", "kv-watcher-creates")).To(HaveLen(n))
		})
	}

	g := NewWithT(t)
	out, err := helm(t, "template", "kv", chart, "--kube-version", "1.24.17")
	g.Expect(err).To(HaveOccurred(), "helm renders the chart for Kubernetes 1.24:\n%s", out)
	g.Expect(out).To(ContainSubstring("kubeVersion"))

	data, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Split(string(data), "\n")).To(ContainElement(`kubeVersion: ">=1.25.0-0"`))
	readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, want := range []string{"Kubernetes 1.25 and later", "Kubernetes 1.30 and later", "make image", "image.repository"} {
		g.Expect(strings.Contains(string(readme), want)).To(BeTrue(), "the chart's README says %q (the versions, how to get an image)", want)
	}
}
