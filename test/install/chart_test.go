package install

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// examples are the values files of the chart's examples/.
func examples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chart, "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	return files
}

// TestLint: helm lint --strict passes with the default values and with
// every values file of examples/.
func TestLint(t *testing.T) {
	mustHelm(t, "lint", "--strict", chart)
	for _, f := range examples(t) {
		mustHelm(t, "lint", "--strict", chart, "-f", f)
	}
}

// servesPolicies are the helm template arguments of an API server that
// serves ValidatingAdmissionPolicy, as the test control plane does (helm
// install asks the API server itself).
var servesPolicies = []string{"--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"}

// TestTemplate renders the chart over several values sets, for an API
// server that serves ValidatingAdmissionPolicy, and checks what each must
// and must not hold; the API server then accepts every object
// (server-side apply, dry run), and the pod of the Deployment is admitted
// in a namespace enforcing the restricted Pod Security Standard, with no
// warning.
func TestTemplate(t *testing.T) {
	ex := func(name string) string { return filepath.Join(chart, "examples", name) }
	for _, tc := range []struct {
		name  string
		args  []string
		check func(g Gomega, objs []*unstructured.Unstructured, d *appsv1.Deployment)
	}{
		{"defaults", nil, func(g Gomega, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
			g.Expect(kinds(objs)).To(Equal("ClusterRole ClusterRoleBinding Deployment Role RoleBinding Service ServiceAccount ValidatingAdmissionPolicy ValidatingAdmissionPolicyBinding"))
			userRoles(g, objs, "tpl-watcher")
			g.Expect(find(objs, "ValidatingAdmissionPolicy", "tpl-watcher-creates")).To(HaveLen(1))
			g.Expect(find(objs, "ValidatingAdmissionPolicyBinding", "tpl-watcher-creates")).To(HaveLen(1))
			g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
			g.Expect(envOf(d)).To(HaveKeyWithValue("LOCK_BACKEND", "lease"))
			g.Expect(envOf(d)).NotTo(HaveKey("NAMESPACES"))
			// Opted-in Jobs are re-created (deleted, then created again).
			g.Expect(rules(g, objs, "ClusterRole")).To(ContainElement("batch/jobs: get,list,watch,patch,create,delete"))
			g.Expect(rules(g, objs, "ClusterRole")).To(ContainElement("apiextensions.k8s.io/customresourcedefinitions: get,list,watch"),
				"the CRDs are watched to follow the optional APIs")
			g.Expect(rules(g, objs, "Role")).To(ContainElement("coordination.k8s.io/leases/[tpl-watcher]: get,update"))
		}},
		{"namespaced", []string{"-f", ex("namespaced.yaml")}, func(g Gomega, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
			// No cluster-wide right for watcher: the only ClusterRoles are
			// the users' aggregated ones, bound to nobody here.
			userRoles(g, objs, "tpl-watcher")
			g.Expect(find(objs, "ClusterRole", "")).To(HaveLen(2))
			g.Expect(find(objs, "ClusterRoleBinding", "")).To(BeEmpty())
			g.Expect(find(objs, "Role", "tpl-watcher-alert-url")).To(BeEmpty(), "no alert URL Secret, no Role for it")
			g.Expect(namespaces(find(objs, "Role", "tpl-watcher"))).To(Equal("team-a team-b"))
			g.Expect(namespaces(find(objs, "RoleBinding", "tpl-watcher"))).To(Equal("team-a team-b"))
			g.Expect(envOf(d)).To(HaveKeyWithValue("NAMESPACES", "team-a,team-b"))
		}},
		{"alert URL from a Secret, namespaced, no user roles or admission policies", []string{"-f", ex("namespaced.yaml"), "--set", "alerts.webhookURLSecret=alerts-tpl/hook:url,rbac.userRoles=false,rbac.admissionPolicies=false"}, func(g Gomega, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
			g.Expect(find(objs, "ClusterRole", "")).To(BeEmpty())
			g.Expect(find(objs, "ValidatingAdmissionPolicy", "")).To(BeEmpty())
			// The Secret's namespace is not watched: a Role there reads
			// that one Secret by name.
			role := find(objs, "Role", "tpl-watcher-alert-url")
			g.Expect(namespaces(role)).To(Equal("alerts-tpl"))
			g.Expect(rules(g, role, "Role")).To(Equal([]string{"secrets/[hook]: get,list,watch"}))
			g.Expect(namespaces(find(objs, "RoleBinding", "tpl-watcher-alert-url"))).To(Equal("alerts-tpl"))
			g.Expect(envOf(d)).To(HaveKeyWithValue("ALERT_WEBHOOK_URL_SECRET", "alerts-tpl/hook:url"))
		}},
		{"redis, HA", []string{"-f", ex("redis.yaml"), "--set", "redis.existingSecret=watcher-redis"}, func(g Gomega, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
			g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))
			g.Expect(find(objs, "PodDisruptionBudget", "")).To(HaveLen(1))
			env := d.Spec.Template.Spec.Containers[0].Env
			g.Expect(env).To(ContainElement(corev1.EnvVar{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "watcher-redis"}, Key: "password"}}}))
			g.Expect(envOf(d)).To(HaveKeyWithValue("LOCK_BACKEND", "redis"))
			g.Expect(envOf(d)).NotTo(HaveKey("LEASE_NAME"))
			g.Expect(rules(g, objs, "Role")).NotTo(ContainElement(ContainSubstring("leases")))
		}},
		{"lease, HA", []string{"-f", ex("lease-ha.yaml")}, func(g Gomega, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
			g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))
			g.Expect(find(objs, "PodDisruptionBudget", "")).To(HaveLen(1))
			tsc := d.Spec.Template.Spec.TopologySpreadConstraints
			g.Expect(tsc).To(HaveLen(1))
			g.Expect(tsc[0].LabelSelector.MatchLabels).To(Equal(d.Spec.Selector.MatchLabels))
		}},
		{"monitoring", []string{"-f", ex("monitoring.yaml")}, func(g Gomega, objs []*unstructured.Unstructured, _ *appsv1.Deployment) {
			g.Expect(find(objs, "ServiceMonitor", "")).To(HaveLen(1))
			g.Expect(find(objs, "PrometheusRule", "")).To(HaveLen(1))
			g.Expect(find(objs, "NetworkPolicy", "")).To(HaveLen(1))
			cms := find(objs, "ConfigMap", "tpl-watcher-dashboard")
			g.Expect(cms).To(HaveLen(1))
			g.Expect(cms[0].GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))
		}},
		{"single, no lock, CronJob trigger", []string{"-f", ex("single.yaml"), "--set", "restart.cronjobTrigger=true,priorityClassName=system-cluster-critical"}, func(g Gomega, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
			g.Expect(envOf(d)).To(HaveKeyWithValue("LOCK_BACKEND", "none"))
			g.Expect(envOf(d)).To(HaveKeyWithValue("CRONJOB_TRIGGER", "true"))
			g.Expect(d.Spec.Template.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
			g.Expect(rules(g, objs, "ClusterRole")).To(ContainElement("batch/jobs: get,list,watch,patch,create,delete"))
		}},
		{"a Reloader Deployment's arguments", []string{"--set-json", `extraArgs=["--auto-reload-all=true","--namespaces-to-ignore=kube-system"]`}, func(g Gomega, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{"--auto-reload-all=true", "--namespaces-to-ignore=kube-system"}))
		}},
		{"Jobs ignored, CronJob trigger", []string{"--set", "restart.cronjobTrigger=true,discovery.ignoreWorkloadKinds={Job}"}, func(g Gomega, objs []*unstructured.Unstructured, d *appsv1.Deployment) {
			// Only what the trigger needs: create a Job, replace a running one.
			g.Expect(rules(g, objs, "ClusterRole")).To(ContainElement("batch/jobs: create,get,delete"))
			g.Expect(rules(g, objs, "ClusterRole")).NotTo(ContainElement(ContainSubstring("batch/jobs: get,list")))
			g.Expect(find(objs, "ValidatingAdmissionPolicy", "tpl-watcher-creates")).To(HaveLen(1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(t, "tpl-"+strings.ToLower(strings.FieldsFunc(tc.name, func(r rune) bool { return r == ',' || r == ' ' })[0]), restricted)
			for _, n := range []string{"team-a", "team-b", "alerts-tpl"} {
				if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			}
			objs := render(t, "tpl", ns, append(append(tc.args, servesPolicies...), "--include-crds")...)
			d := deployment(t, objs)
			tc.check(g, objs, d)
			for _, o := range objs {
				warnings := dryRunApply(t, o)
				g.Expect(warnings).To(BeEmpty(), "%s %s", o.GetKind(), o.GetName())
			}
			g.Expect(d.Spec.Template.Spec.EnableServiceLinks).To(Equal(ptr.To(false)))
			admitPod(t, ns, d.Spec.Template.Spec)
		})
	}
}

// TestRedisExample: the example Redis of deploy/redis.yaml is accepted by
// the API server and its pod meets the restricted standard.
func TestRedisExample(t *testing.T) {
	ns := namespace(t, "redis-example", restricted)
	for _, o := range readObjects(t, filepath.Join(root, "deploy", "redis.yaml")) {
		o.SetNamespace(ns)
		NewWithT(t).Expect(dryRunApply(t, o)).To(BeEmpty(), "%s %s", o.GetKind(), o.GetName())
		if o.GetKind() == "StatefulSet" {
			var s appsv1.StatefulSet
			NewWithT(t).Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &s)).To(Succeed())
			admitPod(t, ns, s.Spec.Template.Spec)
		}
	}
}

// TestTemplateRefuses: values that cannot work stop helm with a message
// saying why.
func TestTemplateRefuses(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"rbac.scope=namespaced", "needs the namespaces to watch in discovery.namespaces"},
		{"rbac.scope=everywhere", "value must be one of 'cluster', 'namespaced'"},
		{"replicas=3,lock.mode=none", "replicas > 1 needs lock.mode lease or redis"},
		// values.schema.json
		{"lock.mode=redis2", "value must be one of 'lease', 'redis', 'none'"},
		{"replica=3", "additional properties 'replica' not allowed"},
		{"restart.coalesce=soon", "/restart/coalesce"},
		{"rbac.scope=namespaced,discovery.namespaces={a},alerts.webhookURLSecret=alerts/hook", "/alerts/webhookURLSecret"},
	} {
		out, err := helm(t, "template", "tpl", chart, "--set", tc.args)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("--set %s: want an error saying %q, got %v:\n%s", tc.args, tc.want, err, out)
		}
	}
}

// warnings collects the API server's warnings.
type warnings struct{ msgs []string }

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) { w.msgs = append(w.msgs, msg) }

// dryRunApply applies o server-side as a dry run, failing the test if the
// API server refuses it, and returns its warnings.
func dryRunApply(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(kube.RESTConfig())
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o = o.DeepCopy()
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.DryRunAll, client.ForceOwnership, client.FieldOwner("install-test")); err != nil {
		t.Fatalf("server-side dry-run of %s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return w.msgs
}

// admitPod creates a Pod of spec in ns (a restricted namespace) as a dry
// run: the API server admits it. The same pod without its security contexts
// is refused, so the namespace does enforce the standard.
func admitPod(t *testing.T, ns string, spec corev1.PodSpec) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "pss-"}, Spec: *spec.DeepCopy()}
	if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("the restricted standard refuses the pod: %v", err)
	}
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "pss-"}, Spec: *spec.DeepCopy()}
	bad.Spec.SecurityContext, bad.Spec.Containers[0].SecurityContext = nil, nil
	if err := k8s.Create(ctx, bad, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Fatalf("namespace %s does not enforce the restricted standard: %v", ns, err)
	}
	// A workload of that pod is admitted with warnings: dryRunApply sees
	// them.
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pss"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pss"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "pss"}}, Spec: bad.Spec},
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
	if err != nil {
		t.Fatal(err)
	}
	if w := dryRunApply(t, &unstructured.Unstructured{Object: u}); len(w) == 0 {
		t.Fatalf("no Pod Security warning for a Deployment of a pod the standard refuses")
	}
}

// userRoles checks the aggregated ClusterRoles of release (its full name):
// view gets read rights on ReloadPolicies (and so edit and admin), edit
// and admin write rights; none on their status.
func userRoles(g Gomega, objs []*unstructured.Unstructured, fullname string) {
	view := find(objs, "ClusterRole", fullname+"-reloadpolicies-view")
	g.Expect(view).To(HaveLen(1))
	g.Expect(view[0].GetLabels()).To(And(
		HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-view", "true"),
		HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-edit", "true"),
		HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-admin", "true")))
	g.Expect(rules(g, view, "ClusterRole")).To(Equal([]string{"watcher.dev/reloadpolicies: get,list,watch"}))
	edit := find(objs, "ClusterRole", fullname+"-reloadpolicies-edit")
	g.Expect(edit).To(HaveLen(1))
	g.Expect(edit[0].GetLabels()).To(And(
		Not(HaveKey("rbac.authorization.k8s.io/aggregate-to-view")),
		HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-edit", "true"),
		HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-admin", "true")))
	g.Expect(rules(g, edit, "ClusterRole")).To(Equal([]string{"watcher.dev/reloadpolicies: create,update,patch,delete,deletecollection"}))
}

// kinds lists the kinds of objs, sorted and unique.
func kinds(objs []*unstructured.Unstructured) string {
	seen := map[string]bool{}
	var out []string
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" && !seen[o.GetKind()] {
			seen[o.GetKind()] = true
			out = append(out, o.GetKind())
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// namespaces lists the namespaces of objs.
func namespaces(objs []*unstructured.Unstructured) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetNamespace())
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// rules lists the rules of the objects of kind (ClusterRole or Role) as
// "group/resource[/names]: verbs".
func rules(g Gomega, objs []*unstructured.Unstructured, kind string) []string {
	var out []string
	for _, o := range find(objs, kind, "") {
		var r rbacv1.ClusterRole
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r)).To(Succeed())
		for _, rule := range r.Rules {
			for _, group := range rule.APIGroups {
				for _, res := range rule.Resources {
					s := strings.TrimPrefix(group+"/"+res, "/")
					if len(rule.ResourceNames) > 0 {
						s += "/[" + strings.Join(rule.ResourceNames, ",") + "]"
					}
					out = append(out, s+": "+strings.Join(rule.Verbs, ","))
				}
			}
		}
	}
	return out
}
