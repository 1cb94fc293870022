// Package settings holds the installation's settings that change what
// watcher decides, as one value, and builds from it the two things that
// decide: the Resolver (which objects a workload uses) and the rule Chain
// (which references count). The controller (package app builds it from the
// options) and the explain and graph commands (package cli) both build
// them here, so a new setting is added once and the commands report what
// the controller does. Settings binds its own flags (BindFlags, flags.go):
// a new setting is a field and its flag there, which the controller binds
// (package options embeds Settings), publishes, and the commands take as
// overrides of the published value (Override).
//
// The running controller publishes its Settings in a ConfigMap of its own
// namespace (Publish, named by ConfigMapName), which holds no secret: the
// commands read it with their user's rights (Read) and take the flags
// given on their command line only as overrides, so nobody has to repeat
// the installation's flags to explain a workload.
package settings

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/resolve"
)

// Settings are what an installation decides with, beyond the objects of the
// cluster. The JSON names are those of the controller's flags.
type Settings struct {
	// Annotation is the opt-out annotation key.
	Annotation string `json:"annotation"`
	// Discovery is plan.DiscoveryAll or plan.DiscoveryAnnotated.
	Discovery string `json:"discovery"`
	// Namespaces watched; empty: all.
	Namespaces []string `json:"namespaces,omitempty"`
	// IgnoreConfigMapNamespaces and IgnoreSecretNamespaces: see
	// resolve.Options.
	IgnoreConfigMapNamespaces []string `json:"ignoreConfigMapNamespaces,omitempty"`
	IgnoreSecretNamespaces    []string `json:"ignoreSecretNamespaces,omitempty"`
	// WorkloadSelector and ConfigSelector are label selectors (text) of the
	// workloads and of the ConfigMaps and Secrets watched; empty: all.
	WorkloadSelector string `json:"workloadSelector,omitempty"`
	ConfigSelector   string `json:"configSelector,omitempty"`
	// NamespaceSelector is the label selector (text) of the namespaces
	// watched; empty: all.
	NamespaceSelector string `json:"namespaceSelector,omitempty"`
	// IgnoreWorkloadKinds are the workload kinds neither watched nor
	// restarted.
	IgnoreWorkloadKinds []string `json:"ignoreWorkloadKinds,omitempty"`
	// RestartOnCreate and ReloadOnDelete: see plan.Input.
	RestartOnCreate bool `json:"reloadOnCreate"`
	ReloadOnDelete  bool `json:"reloadOnDelete"`
	// HashKeySecret names the Secret of watcher's namespace holding the
	// installation's hash key (its name only).
	HashKeySecret string `json:"hashKeySecret"`
	// AnnotationKeys renames the opting-in annotations (optin.Keys).
	AnnotationKeys optin.Keys `json:"annotationKeys,omitempty"`
	// CSI tells whether the Secrets Store CSI Driver's rotations restart
	// workloads (--csi, Reloader's --enable-csi-integration).
	CSI bool `json:"csi"`
}

// Resolver returns the Resolver of the installation: every source watcher
// reads, the ReloadPolicies of policies among them (nil: none), less the
// ignored namespaces.
func (s Settings) Resolver(policies *policy.Index) *resolve.Resolver {
	rs := resolve.Settings{
		IgnoreConfigMapNamespaces: s.IgnoreConfigMapNamespaces,
		IgnoreSecretNamespaces:    s.IgnoreSecretNamespaces,
	}
	if policies != nil {
		rs.Sources = []resolve.Source{policy.References{Index: policies}}
	}
	return resolve.Standard(rs)
}

// Rules returns the installation's rules (plan.NewChain).
func (s Settings) Rules() plan.Chain {
	return plan.NewChain(plan.Options{OptOutAnnotation: s.Annotation, Discovery: s.Discovery})
}

// Selectors parses WorkloadSelector and ConfigSelector; nil where empty.
func (s Settings) Selectors() (workloads, configs labels.Selector, err error) {
	if s.WorkloadSelector != "" {
		if workloads, err = labels.Parse(s.WorkloadSelector); err != nil {
			return nil, nil, fmt.Errorf("invalid workload selector: %w", err)
		}
	}
	if s.ConfigSelector != "" {
		if configs, err = labels.Parse(s.ConfigSelector); err != nil {
			return nil, nil, fmt.Errorf("invalid config selector: %w", err)
		}
	}
	return workloads, configs, nil
}

// NamespaceLabels parses NamespaceSelector; nil when empty.
func (s Settings) NamespaceLabels() (labels.Selector, error) {
	if s.NamespaceSelector == "" {
		return nil, nil
	}
	sel, err := labels.Parse(s.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("invalid namespace selector: %w", err)
	}
	return sel, nil
}

// DataKey is the key of the published ConfigMap holding the Settings as
// JSON.
const DataKey = "settings.json"

// ConfigMapName is the name of the ConfigMap in which the installation
// whose Lease is called lease publishes its Settings.
func ConfigMapName(lease string) string { return lease + "-settings" }

// Publish writes s into the ConfigMap name of namespace, creating it, or
// updating it when it holds other settings; it writes nothing when the
// ConfigMap already holds s.
func Publish(ctx context.Context, c client.Client, namespace, name string, s Settings) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	var cm corev1.ConfigMap
	err = c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
				"app.kubernetes.io/name": "watcher", "app.kubernetes.io/component": "settings",
			}},
			Data: map[string]string{DataKey: string(data)},
		}
		return c.Create(ctx, &cm)
	case err != nil:
		return err
	case cm.Data[DataKey] == string(data):
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[DataKey] = string(data)
	return c.Update(ctx, &cm)
}

// Read returns the Settings published in the ConfigMap name of namespace.
func Read(ctx context.Context, c client.Reader, namespace, name string) (Settings, error) {
	var cm corev1.ConfigMap
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &cm); err != nil {
		return Settings{}, err
	}
	var s Settings
	data, ok := cm.Data[DataKey]
	if !ok {
		return s, fmt.Errorf("ConfigMap %s/%s has no key %s", namespace, name, DataKey)
	}
	if err := json.Unmarshal([]byte(data), &s); err != nil {
		return s, fmt.Errorf("ConfigMap %s/%s: %s: %w", namespace, name, DataKey, err)
	}
	return s, nil
}
