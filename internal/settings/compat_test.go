package settings_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/settings"
)

// previous are settings.json as the previous version of watcher published
// it (written by that version, every field set, and its defaults), with
// the settings they hold: a CLI reads the ConfigMap of a controller of
// another version, in both directions, so the format must not change.
var previous = []struct {
	json string
	want settings.Settings
}{
	{
		`{"annotation":"example.com/restart","discovery":"annotated","namespaces":["shop","web"],"ignoreConfigMapNamespaces":["kube-system"],"ignoreSecretNamespaces":["*"],"workloadSelector":"app=web","configSelector":"team=a","namespaceSelector":"env=prod","ignoreWorkloadKinds":["CronJob","Job"],"reloadOnCreate":true,"reloadOnDelete":true,"hashKeySecret":"my-key","annotationKeys":{"reloader.stakater.com/auto":"example.com/auto"},"csi":true}`,
		settings.Settings{
			Annotation: "example.com/restart", Discovery: "annotated", Namespaces: []string{"shop", "web"},
			IgnoreConfigMapNamespaces: []string{"kube-system"}, IgnoreSecretNamespaces: []string{"*"},
			WorkloadSelector: "app=web", ConfigSelector: "team=a", NamespaceSelector: "env=prod",
			IgnoreWorkloadKinds: []string{"CronJob", "Job"}, RestartOnCreate: true, ReloadOnDelete: true,
			HashKeySecret: "my-key", AnnotationKeys: optin.Keys{optin.ReloaderAuto: "example.com/auto"}, CSI: true,
		},
	},
	{
		`{"annotation":"require-restart","discovery":"all","ignoreConfigMapNamespaces":["ingress-aws-lb-controller","istio-system","karpenter","kube-system","kubesphere-system"],"ignoreSecretNamespaces":["ingress-aws-lb-controller","istio-system","karpenter","kube-system","kubesphere-system"],"reloadOnCreate":false,"reloadOnDelete":false,"hashKeySecret":"watcher-hash-key","csi":false}`,
		settings.Defaults(),
	},
}

// TestPreviousVersion: this version reads what the previous one published
// and publishes, for the same settings, the very same bytes, which the
// previous version reads as it reads its own.
func TestPreviousVersion(t *testing.T) {
	ctx := context.Background()
	for i, p := range previous {
		c := fake.NewClientBuilder().WithObjects(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "watcher", Name: "old-settings"},
			Data:       map[string]string{settings.DataKey: p.json},
		}).Build()
		got, err := settings.Read(ctx, c, "watcher", "old-settings")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(p.want, got); diff != "" {
			t.Errorf("%d: read (-want +got):\n%s", i, diff)
		}
		if err := settings.Publish(ctx, c, "watcher", "new-settings", got); err != nil {
			t.Fatal(err)
		}
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: "watcher", Name: "new-settings"}, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Data[settings.DataKey] != p.json {
			t.Errorf("%d: published\n%s\nthe previous version published\n%s", i, cm.Data[settings.DataKey], p.json)
		}
	}
}

// TestFlags: every setting has a flag that sets it, and Override copies
// exactly the settings whose flag was given.
func TestFlags(t *testing.T) {
	var s settings.Settings
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	s.BindFlags(fs)
	args := []string{"--annotation=example.com/restart", "--discovery=annotated", "--namespaces=shop", "--namespaces=web",
		"--ignore-configmap-namespaces=kube-system", "--ignore-secret-namespaces=*", "--workload-selector=app=web",
		"--config-selector=team=a", "--namespace-selector=env:prod", "--ignore-workload-kinds=CronJob,Job",
		"--reload-on-create", "--reload-on-delete", "--hash-key-secret=my-key",
		"--annotation-keys=" + optin.ReloaderAuto + "=example.com/auto", "--csi"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(previous[0].want, s); diff != "" {
		t.Errorf("flags (-want +got):\n%s", diff)
	}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("no flag given sets %s: a setting needs its flag (flags.go) and a case here", v.Type().Field(i).Name)
		}
	}

	published := settings.Defaults()
	published.Override(s, func(flag string) bool { return flag == "discovery" || flag == "restart-on-create" })
	want := settings.Defaults()
	want.Discovery, want.RestartOnCreate = "annotated", true
	if diff := cmp.Diff(want, published); diff != "" {
		t.Errorf("override (-want +got):\n%s", diff)
	}
}
