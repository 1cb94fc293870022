package settings_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/settings"
)

// counting counts the writes that reach the (fake) API server.
type counting struct {
	client.Client
	writes int
}

func (c *counting) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.writes++
	return c.Client.Create(ctx, obj, opts...)
}

func (c *counting) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.writes++
	return c.Client.Update(ctx, obj, opts...)
}

// TestPublishRead: published settings read back equal; publishing the same
// settings again writes nothing, other settings update the ConfigMap.
func TestPublishRead(t *testing.T) {
	ctx := context.Background()
	c := &counting{Client: fake.NewClientBuilder().Build()}
	name := settings.ConfigMapName("watcher")
	s := settings.Settings{
		Annotation: "require-restart", Discovery: plan.DiscoveryAnnotated, Namespaces: []string{"a", "b"},
		IgnoreSecretNamespaces: []string{"kube-system"}, WorkloadSelector: "team=x", ReloadOnDelete: true, HashKeySecret: "key",
		NamespaceSelector: "team=on",
	}
	for range 2 {
		if err := settings.Publish(ctx, c, "watcher", name, s); err != nil {
			t.Fatal(err)
		}
	}
	if c.writes != 1 {
		t.Errorf("writes for the same settings published twice: %d, want 1", c.writes)
	}
	got, err := settings.Read(ctx, c, "watcher", name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotation != s.Annotation || got.Discovery != s.Discovery || len(got.Namespaces) != 2 || !got.ReloadOnDelete ||
		got.WorkloadSelector != "team=x" || got.HashKeySecret != "key" || got.IgnoreSecretNamespaces[0] != "kube-system" ||
		got.NamespaceSelector != "team=on" {
		t.Errorf("read back %+v, want %+v", got, s)
	}
	s.Discovery = plan.DiscoveryAll
	if err := settings.Publish(ctx, c, "watcher", name, s); err != nil {
		t.Fatal(err)
	}
	if got, _ := settings.Read(ctx, c, "watcher", name); got.Discovery != plan.DiscoveryAll || c.writes != 2 {
		t.Errorf("after a change: %+v, %d writes", got, c.writes)
	}
}

// TestReadBad: a ConfigMap without the key, or with what is not JSON, is an
// error naming it, never a panic or half-read settings taken as good.
func TestReadBad(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(
		&corev1.ConfigMap{ObjectMeta: metaOf("empty")},
		&corev1.ConfigMap{ObjectMeta: metaOf("garbage"), Data: map[string]string{settings.DataKey: "{not json"}},
	).Build()
	for _, name := range []string{"empty", "garbage", "missing"} {
		if _, err := settings.Read(ctx, c, "watcher", name); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestRulesAndSelectors: the rules follow the settings; a bad selector is
// an error.
func TestRulesAndSelectors(t *testing.T) {
	s := settings.Settings{Annotation: "x", Discovery: plan.DiscoveryAnnotated}
	if len(s.Rules()) == 0 || s.Resolver(nil) == nil {
		t.Fatal("no rules or resolver")
	}
	if w, c, err := s.Selectors(); err != nil || w != nil || c != nil {
		t.Errorf("empty selectors: %v %v %v", w, c, err)
	}
	s.ConfigSelector = "a in (b"
	if _, _, err := s.Selectors(); err == nil {
		t.Error("bad selector accepted")
	}
	if sel, err := s.NamespaceLabels(); sel != nil || err != nil {
		t.Errorf("empty namespace selector: %v %v", sel, err)
	}
	s.NamespaceSelector = "team=on"
	if sel, err := s.NamespaceLabels(); err != nil || !sel.Matches(labels.Set{"team": "on"}) || sel.Matches(labels.Set{"team": "off"}) {
		t.Errorf("namespace selector team=on: %v %v", sel, err)
	}
	s.NamespaceSelector = "team in (a"
	if _, err := s.NamespaceLabels(); err == nil {
		t.Error("bad namespace selector accepted")
	}
}

func metaOf(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: "watcher", Name: name}
}
