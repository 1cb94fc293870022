package migrate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/watcher-dev/watcher/test/fixture"
)

// chartDeployment returns the Deployment Reloader's chart renders
// (test/fixture/reloader) for value set set, with env added to its
// container.
func chartDeployment(t *testing.T, set string, env ...corev1.EnvVar) *appsv1.Deployment {
	t.Helper()
	r, err := fixture.ReloaderRender(set)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Container()
	c.Env = append(c.Env, env...)
	return r.Deployment
}

// sampleWorkloads are a cluster's workloads as Census gives them.
var sampleWorkloads = []Workload{
	{Kind: "Deployment", Namespace: "shop", Name: "web", OptsIn: true, Annotations: []string{"reloader.stakater.com/auto"},
		WithReloaderArgs: true, WithOwnValues: true, Marks: []Mark{{Via: "env STAKATER_CFG_CONFIGMAP", Object: "ConfigMap"}}},
	{Kind: "Deployment", Namespace: "kube-system", Name: "dns", OptsIn: true, Annotations: []string{"configmap.reloader.stakater.com/reload"},
		WithReloaderArgs: true, OwnValuesWhyNot: "ConfigMap coredns: rule ignored-namespace"},
	{Kind: "CronJob", Namespace: "shop", Name: "nightly", OptsIn: true, Annotations: []string{"reloader.stakater.com/auto"}, WithReloaderArgs: true, WithOwnValues: true},
	{Kind: "Deployment", Namespace: "shop", Name: "plain", WithOwnValues: true},
	{Kind: "Rollout", Namespace: "shop", Name: "canary", OptsIn: true, Annotations: []string{"reloader.stakater.com/auto"}, WithReloaderArgs: true, WithOwnValues: true},
}

// TestCalculate: for each of Reloader's chart value sets, as its chart
// renders them, what to apply (the arguments carried as they are, the
// values given on helm's command line) and the differences on a sample
// cluster.
func TestCalculate(t *testing.T) {
	tests := []struct {
		set       string
		extraArgs []string
		values    map[string]string
		without   []string
		topics    []string
		text      []string
	}{{
		set:       fixture.ReloaderDefault,
		extraArgs: []string{"--log-level=info"},
		values:    map[string]string{"discovery.mode": `"annotated"`, "discovery.ignoreConfigMapNamespaces": `[]`, "discovery.ignoreSecretNamespaces": `[]`},
		// Reloader's default strategy is env-vars, watcher's annotation.
		topics:  []string{TopicOwnValues, TopicOwnValues, TopicKinds, TopicKinds, TopicStrategy, TopicAnnotations, TopicAnnotations, TopicAnnotations, TopicGuards},
		without: []string{"replicas", "discovery.namespaces", "rbac.scope", "extraEnv", "restart.strategy"},
		text:    []string{"Reloader writes a restart as env-vars, watcher as annotation", "--restart-strategy=env", "Argo Rollouts: Reloader restarts none", "kube-system (1)"},
	}, {
		set:     fixture.ReloaderNamespaced,
		values:  map[string]string{"discovery.mode": `"annotated"`, "discovery.namespaces": `["reloader"]`, "rbac.scope": `"namespaced"`},
		without: []string{"replicas"},
		text:    []string{"KUBERNETES_NAMESPACE: watching namespace reloader alone", "watcher migrate --compare -n reloader"},
	}, {
		set: fixture.ReloaderHA,
		extraArgs: []string{"--log-level=info", "--enable-ha=true", "--leader-election-lease-duration=20s",
			"--leader-election-renew-deadline=15s", "--leader-election-retry-period=3s"},
		values: map[string]string{"replicas": "2", "discovery.mode": `"annotated"`,
			"lock.leaseDuration": `"20s"`, "lock.leaseRenewDeadline": `"15s"`, "lock.leaseRetryPeriod": `"3s"`},
		text: []string{"[flags] Reloader's --enable-ha accepted"},
	}, {
		set:       fixture.ReloaderIgnoreSecrets,
		extraArgs: []string{"--log-level=info", "--resources-to-ignore=secrets"},
		values:    map[string]string{"discovery.ignoreSecretNamespaces": `["*"]`, "discovery.ignoreConfigMapNamespaces": `[]`},
	}, {
		set:       fixture.ReloaderNamespaceSelector,
		extraArgs: []string{"--log-level=info", `--namespace-selector="team:a"`},
		values:    map[string]string{"discovery.namespaceSelector": `"team=a"`},
	}, {
		set:       fixture.ReloaderWebhook,
		extraArgs: []string{"--log-level=info", "--auto-annotation", "reloader.stakater.com/auto", "--webhook-url", Hidden},
		values:    map[string]string{"alerts.onReload": "true", "alerts.webhookURL": `"` + Hidden + `"`},
		without:   []string{"restart.dryRun"},
		text:      []string{"Reloader's --webhook-url accepted"},
	}, {
		set:    fixture.ReloaderCSI,
		values: map[string]string{"csi.enabled": "true"},
	}, {
		set:    fixture.ReloaderMetricsByNamespace,
		values: map[string]string{"extraEnv": `[{"name":"METRICS_COUNT_BY_NAMESPACE","value":"enabled"}]`},
	}, {
		set:    fixture.ReloaderCustomAnnotations,
		values: map[string]string{"restart.reloadOnCreate": "true", "discovery.annotationKeys": `{"configmap.reloader.stakater.com/reload":"example.com/configmaps","reloader.stakater.com/auto":"example.com/auto","reloader.stakater.com/ignore":"example.com/ignore","reloader.stakater.com/match":"example.com/match","reloader.stakater.com/search":"example.com/search","secret.reloader.stakater.com/reload":"example.com/secrets"}`},
		text:   []string{"read the same: example.com/auto (Reloader's reloader.stakater.com/auto)"},
	}}
	for _, tt := range tests {
		t.Run(tt.set, func(t *testing.T) {
			found := Find([]appsv1.Deployment{*chartDeployment(t, tt.set)}, "")
			if len(found) != 1 {
				t.Fatalf("Find = %d Reloaders, want 1", len(found))
			}
			o, err := found[0].Options()
			if err != nil {
				t.Fatalf("Options: %v", err)
			}
			p := Calculate(Input{Reloader: found[0], Options: o, Workloads: sampleWorkloads,
				Install: Install{Release: "watcher", Namespace: "watcher", Chart: "deploy/helm/watcher", Image: "watcher:1", RBAC: "deploy/reloader"}})
			if tt.extraArgs != nil && !slices.Equal(p.Helm.ExtraArgs, tt.extraArgs) {
				t.Errorf("extraArgs = %q, want %q", p.Helm.ExtraArgs, tt.extraArgs)
			}
			args := jsonText(p.Helm.ExtraArgs)
			if !strings.Contains(p.Helm.Install, quote("extraArgs="+args)) {
				t.Errorf("install command without extraArgs %s:\n%s", args, p.Helm.Install)
			}
			got := map[string]string{}
			for _, v := range p.Helm.Values {
				got[v.Path] = v.JSON
			}
			for path, want := range tt.values {
				if got[path] != want {
					t.Errorf("value %s = %s, want %s (values %v)", path, got[path], want, got)
				}
			}
			for _, path := range tt.without {
				if _, ok := got[path]; ok {
					t.Errorf("value %s = %s, want none", path, got[path])
				}
			}
			if !strings.Contains(p.Helm.Install, "helm install watcher deploy/helm/watcher -n watcher --create-namespace") ||
				strings.Contains(p.Helm.Install, "--set restart.dryRun=true") == o.DryRun {
				t.Errorf("install command (dry-run already: %t):\n%s", o.DryRun, p.Helm.Install)
			}
			if tt.topics != nil {
				var topics []string
				for _, d := range p.Differences {
					topics = append(topics, d.Topic)
				}
				if !slices.Equal(topics, tt.topics) {
					t.Errorf("topics = %q, want %q", topics, tt.topics)
				}
			}
			var text bytes.Buffer
			if err := p.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.text {
				if !strings.Contains(text.String(), s) {
					t.Errorf("text lacks %q", s)
				}
			}
			if strings.Contains(text.String(), "hooks.example") || strings.Contains(p.Helm.Install, "hooks.example") {
				t.Errorf("the webhook URL is printed")
			}
			if t.Failed() {
				t.Logf("text:\n%s", text.String())
			}
		})
	}
}

// TestImageSwap: the image swap names Reloader's namespace, ServiceAccount
// and container, and the RBAC of Reloader's mode: edited from the file, or
// printed by the command when the manifest is known.
func TestImageSwap(t *testing.T) {
	manifest := func(ns, sa string, single bool) string { return fmt.Sprintf("rbac for %s %s %t", ns, sa, single) }
	tests := []struct {
		set      string
		manifest func(string, string, bool) string
		rbac     string
		printed  string
	}{
		{"default", nil, "sed -e 's/namespace: reloader$/namespace: reloader/' -e 's/name: reloader-reloader$/name: reloader-reloader/' " +
			"-e 's/image-swap-reloader$/image-swap-reloader/' -e 's/:reloader:reloader-reloader/:reloader:reloader-reloader/' " +
			`-e "s/namespace == 'reloader'/namespace == 'reloader'/" deploy/reloader/rbac.yaml deploy/reloader/admissionpolicy.yaml | kubectl apply -f -`, ""},
		{"namespaced", nil, "deploy/reloader/rbac-namespaced.yaml deploy/reloader/admissionpolicy.yaml | kubectl apply -f -", ""},
		{"namespaced", manifest, "watcher migrate -n reloader --deployment reloader-reloader -o rbac | kubectl apply -f -", "rbac for reloader reloader-reloader true"},
		{"ha", manifest, "watcher migrate -n reloader --deployment reloader-reloader -o rbac | kubectl apply -f -", "rbac for reloader reloader-reloader false"},
	}
	for _, tt := range tests {
		r := Find([]appsv1.Deployment{*chartDeployment(t, tt.set)}, "")[0]
		o, err := r.Options()
		if err != nil {
			t.Fatal(err)
		}
		p := Calculate(Input{Reloader: r, Options: o, Unread: "forbidden",
			Install: Install{Image: "registry.example/watcher:1", RBAC: "deploy/reloader", Manifest: tt.manifest, Command: "watcher migrate"}})
		want := "kubectl -n reloader set image deployment/reloader-reloader reloader-reloader=registry.example/watcher:1"
		if len(p.ImageSwap.Commands) != 2 || !strings.HasSuffix(p.ImageSwap.Commands[0], tt.rbac) || p.ImageSwap.Commands[1] != want {
			t.Errorf("%s: commands = %q, want %q then %q", tt.set, p.ImageSwap.Commands, tt.rbac, want)
		}
		if p.ImageSwap.Manifest != tt.printed {
			t.Errorf("%s: manifest %q, want %q", tt.set, p.ImageSwap.Manifest, tt.printed)
		}
		if p.Counts != nil || p.Unread != "forbidden" {
			t.Errorf("counts %v, unread %q: want none, and why", p.Counts, p.Unread)
		}
	}
}

// TestFind: by image, by name, and none.
func TestFind(t *testing.T) {
	other := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}}}
	rel := *chartDeployment(t, fixture.ReloaderHA)
	deps := []appsv1.Deployment{other, rel}
	tests := []struct {
		name string
		want []string
	}{
		{"", []string{"reloader/reloader-reloader"}},
		{"reloader-reloader", []string{"reloader/reloader-reloader"}},
		{"web", []string{"shop/web"}}, // named: its first container, whatever its image
		{"none", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, r := range Find(deps, tt.name) {
			got = append(got, r.Namespace+"/"+r.Name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Find(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	r := Find(deps, "")[0]
	if r.Replicas != 2 || r.Env["POD_NAMESPACE"] != "reloader" || r.Env["RELOADER_NAMESPACE"] != "reloader" || r.ServiceAccount != "reloader-reloader" {
		t.Errorf("read %+v", r)
	}
	if _, ok := r.Env["GOMAXPROCS"]; ok {
		t.Errorf("GOMAXPROCS, a resource field, read as %q", r.Env["GOMAXPROCS"])
	}
}

// TestSecretEnv: a variable from a Secret is never read, and the alert URL
// it holds is read by watcher where it is.
func TestSecretEnv(t *testing.T) {
	d := chartDeployment(t, fixture.ReloaderDefault,
		corev1.EnvVar{Name: "ALERT_ON_RELOAD", Value: "true"},
		corev1.EnvVar{Name: "ALERT_SINK", Value: "slack"},
		corev1.EnvVar{Name: "ALERT_WEBHOOK_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "reloader-reloader"}, Key: "ALERT_WEBHOOK_URL"}}})
	r := Of(d, d.Spec.Template.Spec.Containers[0])
	o, err := r.Options()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range Values(r, o) {
		got[v.Path] = v.JSON
	}
	want := map[string]string{"alerts.onReload": "true", "alerts.sink": `"slack"`, "alerts.webhookURLSecret": `"reloader/reloader-reloader:ALERT_WEBHOOK_URL"`}
	for path, v := range want {
		if got[path] != v {
			t.Errorf("value %s = %s, want %s", path, got[path], v)
		}
	}
	if _, ok := got["alerts.webhookURL"]; ok {
		t.Errorf("alerts.webhookURL set from a Secret's variable: %s", got["alerts.webhookURL"])
	}
}

// TestShownArgs: a webhook URL never shows.
func TestShownArgs(t *testing.T) {
	tests := []struct{ in, want []string }{
		{[]string{"--webhook-url", "https://hooks.example/T0/B0/secret"}, []string{"--webhook-url", Hidden}},
		{[]string{"--webhook-url=https://hooks.example/T0/B0/secret", "--enable-ha"}, []string{"--webhook-url=" + Hidden, "--enable-ha"}},
		{[]string{"--reload-strategy", "annotations"}, []string{"--reload-strategy", "annotations"}},
	}
	for _, tt := range tests {
		if got := ShownArgs(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ShownArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestFlag: Reloader's flag forms.
func TestFlag(t *testing.T) {
	tests := []struct {
		args    []string
		name    string
		boolean bool
		want    string
		found   bool
	}{
		{[]string{"--reload-strategy=annotations"}, "reload-strategy", false, "annotations", true},
		{[]string{"--reload-strategy", "env-vars"}, "reload-strategy", false, "env-vars", true},
		{[]string{"--is-Argo-Rollouts=true"}, "is-Argo-Rollouts", true, "true", true},
		{[]string{"--is-Argo-Rollouts", "--enable-ha"}, "is-Argo-Rollouts", true, "true", true},
		{[]string{"--is-Argo-Rollouts", "false"}, "is-Argo-Rollouts", true, "false", true},
		{[]string{`--namespace-selector="team:a"`}, "namespace-selector", false, "team:a", true},
		{[]string{"--enable-ha"}, "reload-strategy", false, "", false},
	}
	for _, tt := range tests {
		if got, found := flag(tt.args, tt.name, tt.boolean); got != tt.want || found != tt.found {
			t.Errorf("flag(%q, %s) = %q %v, want %q %v", tt.args, tt.name, got, found, tt.want, tt.found)
		}
	}
}

// TestValuesInChart: every value the plan may give is a value of watcher's
// chart.
func TestValuesInChart(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "helm", "watcher", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	for _, cv := range chartValues {
		var at any = values
		for _, part := range strings.Split(cv.path, ".") {
			m, ok := at.(map[string]any)
			if !ok {
				at = nil
				break
			}
			at, ok = m[part]
			if !ok {
				at = nil
				break
			}
		}
		if at == nil {
			t.Errorf("%s is not a value of deploy/helm/watcher/values.yaml", cv.path)
		}
	}
}
