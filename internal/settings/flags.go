package settings

import (
	"github.com/spf13/pflag"

	"github.com/watcher-dev/watcher/internal/envflag"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
)

// DefaultIgnoredNamespaces are the namespaces whose ConfigMaps and Secrets
// are ignored unless told otherwise: system namespaces whose workloads are
// managed by their own operators.
var DefaultIgnoredNamespaces = []string{
	"ingress-aws-lb-controller", "istio-system", "karpenter", "kube-system", "kubesphere-system",
}

// Defaults returns the settings watcher decides with when nothing is set.
func Defaults() Settings {
	return Settings{
		IgnoreConfigMapNamespaces: append([]string(nil), DefaultIgnoredNamespaces...),
		IgnoreSecretNamespaces:    append([]string(nil), DefaultIgnoredNamespaces...),
		Annotation:                "require-restart",
		Discovery:                 plan.DiscoveryAll,
		HashKeySecret:             "watcher-hash-key",
	}
}

// flag is the flag of one setting: its name, its environment variable and
// its usage, the value that binds it to its field of a Settings, and how
// that field is copied from one Settings to another.
type flag struct {
	name, env, usage string
	value            func(*Settings) pflag.Value
	copy             func(to, from *Settings)
	// alone is true for a flag that, given alone, is true.
	alone bool
	// sameAs names the other flag of the same setting.
	sameAs string
}

// field returns the flag of the field at of a Settings, read by value.
func field[T any](name, env, usage string, at func(*Settings) *T, value func(*T) pflag.Value) flag {
	return flag{
		name: name, env: env, usage: usage,
		value: func(s *Settings) pflag.Value { return value(at(s)) },
		copy:  func(to, from *Settings) { *at(to) = *at(from) },
	}
}

// boolField is the flag of a boolean field: given alone, it is true.
func boolField(name, env, usage string, at func(*Settings) *bool) flag {
	f := field(name, env, usage, at, envflag.Bool)
	f.alone = true
	return f
}

// flags are the flags of the settings, in the order of the fields. A new
// setting is a field of Settings and its flag here: the controller binds
// it (package options), publishes it, and the commands read it and take
// the flag as an override (package cli).
var flags = []flag{
	field("annotation", "ANNOTATION", `opt-out annotation key: "false" on a workload, ConfigMap or Secret stops restarts`,
		func(s *Settings) *string { return &s.Annotation }, envflag.String),
	field("discovery", "DISCOVERY", `which workloads are restarted: all, or annotated (only those that opt in with watcher.dev/auto or a Reloader annotation)`,
		func(s *Settings) *string { return &s.Discovery },
		func(s *string) pflag.Value { return envflag.OneOf(s, plan.DiscoveryAll, plan.DiscoveryAnnotated) }),
	field("namespaces", "NAMESPACES", "watch only these namespaces (comma-separated, or the flag repeated); empty: all, or KUBERNETES_NAMESPACE alone if set",
		func(s *Settings) *[]string { return &s.Namespaces }, envflag.Appending),
	field("ignore-configmap-namespaces", "IGNORE_CONFIGMAP_NAMESPACES", "namespaces whose ConfigMaps are ignored (comma-separated; * for all)",
		func(s *Settings) *[]string { return &s.IgnoreConfigMapNamespaces }, envflag.List),
	field("ignore-secret-namespaces", "IGNORE_SECRET_NAMESPACES", "namespaces whose Secrets are ignored (comma-separated; * for all)",
		func(s *Settings) *[]string { return &s.IgnoreSecretNamespaces }, envflag.List),
	field("workload-selector", "WORKLOAD_SELECTOR", "label selector of the workloads to restart; empty: all",
		func(s *Settings) *string { return &s.WorkloadSelector }, envflag.String),
	field("config-selector", "CONFIG_SELECTOR", "label selector of the ConfigMaps and Secrets to watch; empty: all",
		func(s *Settings) *string { return &s.ConfigSelector }, envflag.String),
	field("namespace-selector", "NAMESPACE_SELECTOR", "label selector of the namespaces to watch, followed while watcher runs (Reloader's key:value and key:* forms too); empty: all",
		func(s *Settings) *string { return &s.NamespaceSelector }, envflag.Selector),
	field("ignore-workload-kinds", "IGNORE_WORKLOAD_KINDS", "workload kinds never watched nor restarted (comma-separated kind names: CronJob, DaemonSet, Job, ...)",
		func(s *Settings) *[]string { return &s.IgnoreWorkloadKinds }, envflag.List),
	withSameAs(boolField("reload-on-create", "RELOAD_ON_CREATE", "also restart when a ConfigMap or Secret a workload uses is created",
		func(s *Settings) *bool { return &s.RestartOnCreate }), "restart-on-create"),
	withSameAs(boolField("restart-on-create", "RESTART_ON_CREATE", "the same as --reload-on-create (RELOAD_ON_CREATE), its former name",
		func(s *Settings) *bool { return &s.RestartOnCreate }), "reload-on-create"),
	boolField("reload-on-delete", "RELOAD_ON_DELETE", "also restart when a ConfigMap or Secret a workload uses is deleted, if its pods can start without it",
		func(s *Settings) *bool { return &s.ReloadOnDelete }),
	field("hash-key-secret", "HASH_KEY_SECRET", "Secret (in watcher's namespace) holding the key of the recorded hashes; created if missing",
		func(s *Settings) *string { return &s.HashKeySecret }, envflag.String),
	field("annotation-keys", "ANNOTATION_KEYS", "annotations read under other keys, as Reloader's --auto-annotation and like flags: watcher's key=the key read in its place (comma-separated); that key is then read with the meaning of watcher's, and watcher's own no longer",
		func(s *Settings) *optin.Keys { return &s.AnnotationKeys }, envflag.KeyMap),
	boolField("csi", "CSI", "restart the workloads annotated secretproviderclass.reloader.stakater.com/reload or .../auto (or reloader.stakater.com/auto) when the Secrets Store CSI Driver rotates what their pods mount (needs the rights to get pods and replicasets, and to list and watch secretproviderclasspodstatuses)",
		func(s *Settings) *bool { return &s.CSI }),
}

func withSameAs(f flag, other string) flag {
	f.sameAs = other
	return f
}

// BindFlags registers the flag of every setting on fs, each with its
// environment variable (package envflag), as the controller's flags.
func (s *Settings) BindFlags(fs *pflag.FlagSet) {
	for _, f := range flags {
		envflag.Bind(fs, f.value(s), f.name, f.env, f.usage)
		if f.alone {
			fs.Lookup(f.name).NoOptDefVal = "true" // --reload-on-create alone means true
		}
		if f.sameAs != "" {
			_ = fs.SetAnnotation(f.name, envflag.SameAsAnnotation, []string{f.sameAs})
		}
	}
}

// Override sets in s the settings whose flag given tells is given (on a
// command line), to their value in from: the commands read the
// installation's settings and take the flags given as overrides.
func (s *Settings) Override(from Settings, given func(flag string) bool) {
	for _, f := range flags {
		if given(f.name) {
			f.copy(s, &from)
		}
	}
}
