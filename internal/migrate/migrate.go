// Package migrate plans the switch from a running Stakater Reloader to
// watcher (`watcher migrate`, package cli) and checks it afterwards
// (`watcher migrate --compare`). Everything here is pure: package cli reads
// the cluster (the Reloader Deployment, the workloads, their graphs under
// both settings, Events) and hands it in; nothing here calls the API server
// or reads the environment.
//
// Reloader's arguments and environment are read by watcher's own parser
// (options.Parse, exactly as the binary reads them in Reloader's
// Deployment): the mapping of Reloader's flags onto watcher's settings is
// the one in package options, never a second copy.
//
// The plan (Calculate) says what to apply and what changes:
//
//	Reloader's Deployment has        helm install (extraArgs)         image swap
//	its args                         extraArgs, as they are           kept as they are
//	replicas > 1 (or --enable-ha)    replicas; lock.mode lease        kept; lease in its namespace
//	--enable-csi-integration         csi.enabled (RBAC)               RBAC of deploy/reloader
//	--namespaces, KUBERNETES_NAMESPACE  discovery.namespaces,         kept
//	                                 rbac.scope namespaced
//	--namespace-selector             discovery.namespaceSelector (RBAC) kept
//	--ignored-workload-types jobs    discovery.ignoreWorkloadKinds    kept
//	ALERT_* variables                alerts.* (a Secret's: webhookURLSecret)  kept
//	METRICS_COUNT_BY_NAMESPACE       extraEnv                         kept
//
// and the differences that change a restart on that cluster (Difference):
// the workloads that restart with Reloader's arguments but not with
// watcher's own values (ignored namespaces, annotated discovery, custom
// annotation keys), the kinds (CronJobs, Jobs, Argo Rollouts), the
// strategy, the flags watcher does differently (Options.Notes), the
// annotations in use.
package migrate

import (
	"io"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/watcher-dev/watcher/internal/options"
)

// Image is what identifies Reloader's container when no Deployment name is
// given: its image contains it.
const Image = "stakater/reloader"

// Reloader is one running Reloader: its Deployment and the container that
// runs it.
type Reloader struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Container string `json:"container"`
	Image     string `json:"image"`
	Replicas  int32  `json:"replicas"`
	// ServiceAccount runs its pods ("default" when unset).
	ServiceAccount string `json:"serviceAccount"`
	// Args are the container's arguments, as they are.
	Args []string `json:"args"`
	// Env are the container's variables as its process sees them: literal
	// values, and the pod's own fields (metadata.namespace, metadata.name)
	// resolved. Values from resources (GOMAXPROCS...) are left out.
	Env map[string]string `json:"-"`
	// SecretEnv are the variables whose value is a key of a Secret (or a
	// ConfigMap): where, never the value, which is not read.
	SecretEnv map[string]KeyRef `json:"secretEnv,omitempty"`
}

// KeyRef is a key of a Secret or ConfigMap of the Deployment's namespace.
type KeyRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	Key  string `json:"key"`
}

// Find returns the Reloaders among deps: the Deployment called name (its
// first container, or the one whose image contains Image), or, when name is
// empty, every Deployment with a container whose image contains Image.
// They are sorted by namespace and name.
func Find(deps []appsv1.Deployment, name string) []Reloader {
	var out []Reloader
	for i := range deps {
		d := &deps[i]
		if name != "" && d.Name != name {
			continue
		}
		cs := d.Spec.Template.Spec.Containers
		idx := slices.IndexFunc(cs, func(c corev1.Container) bool { return strings.Contains(c.Image, Image) })
		if idx < 0 && name != "" && len(cs) > 0 {
			idx = 0
		}
		if idx < 0 {
			continue
		}
		out = append(out, Of(d, cs[idx]))
	}
	slices.SortFunc(out, func(a, b Reloader) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return out
}

// Of reads the container c of the Deployment d.
func Of(d *appsv1.Deployment, c corev1.Container) Reloader {
	r := Reloader{Namespace: d.Namespace, Name: d.Name, Container: c.Name, Image: c.Image, Replicas: 1,
		ServiceAccount: d.Spec.Template.Spec.ServiceAccountName, Args: slices.Clone(c.Args), Env: map[string]string{}}
	if d.Spec.Replicas != nil {
		r.Replicas = *d.Spec.Replicas
	}
	if r.ServiceAccount == "" {
		r.ServiceAccount = "default"
	}
	// A command's arguments beyond the binary are arguments too.
	if len(c.Command) > 1 {
		r.Args = append(slices.Clone(c.Command[1:]), r.Args...)
	}
	for _, e := range c.Env {
		switch from := e.ValueFrom; {
		case from == nil:
			r.Env[e.Name] = e.Value
		case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.namespace":
			r.Env[e.Name] = d.Namespace
		case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.name":
			r.Env[e.Name] = d.Name + "-pod"
		case from.SecretKeyRef != nil:
			r.secretEnv(e.Name, KeyRef{Kind: "Secret", Name: from.SecretKeyRef.Name, Key: from.SecretKeyRef.Key})
		case from.ConfigMapKeyRef != nil:
			r.secretEnv(e.Name, KeyRef{Kind: "ConfigMap", Name: from.ConfigMapKeyRef.Name, Key: from.ConfigMapKeyRef.Key})
		}
	}
	return r
}

func (r *Reloader) secretEnv(name string, ref KeyRef) {
	if r.SecretEnv == nil {
		r.SecretEnv = map[string]KeyRef{}
	}
	r.SecretEnv[name] = ref
}

// Options reads r's arguments and environment with watcher's own parser,
// as the binary would in Reloader's Deployment. A variable whose value
// comes from a Secret is given a placeholder, so that it counts as set
// and its value is never read; a URL-shaped one, so that it is valid.
func (r Reloader) Options() (*options.Options, error) {
	env := func(name string) (string, bool) {
		if v, ok := r.Env[name]; ok {
			return v, true
		}
		if _, ok := r.SecretEnv[name]; ok {
			return "https://secret.invalid/", true
		}
		return "", false
	}
	return options.Parse(r.Args, env, io.Discard)
}

// flag returns the value of Reloader's flag name among args, as Reloader's
// parser reads it (--name=value, --name value, a boolean alone), and
// whether it is there. It says what Reloader does, not what watcher maps
// it onto (that is options.Parse's).
func flag(args []string, name string, boolean bool) (string, bool) {
	value, found := "", false
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		if len(a) == len(args[i]) {
			continue
		}
		k, v, eq := strings.Cut(a, "=")
		if k != name {
			continue
		}
		found = true
		switch {
		case eq:
			value = v
		case boolean && (i+1 >= len(args) || (args[i+1] != "true" && args[i+1] != "false")):
			value = "true"
		case i+1 < len(args):
			value = args[i+1]
			i++
		}
	}
	return strings.Trim(value, `"`), found
}
