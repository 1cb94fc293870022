package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/watcher-dev/watcher/api/v1alpha1"
	"github.com/watcher-dev/watcher/internal/attribution"
	"github.com/watcher-dev/watcher/internal/cause"
	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/packed"
	"github.com/watcher-dev/watcher/internal/policy"
	"github.com/watcher-dev/watcher/internal/producer"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
	"github.com/watcher-dev/watcher/internal/sealed"
	"github.com/watcher-dev/watcher/internal/workload"
)

// reader reads what the commands report on from a cluster.
type reader struct {
	c         client.Client
	namespace string
	// key hashes the ConfigMaps and Secrets of namespace; nil: unknown.
	key *hash.NamespaceKey
}

// reader connects to the cluster of the kubeconfig and flags.
func (c *command) reader() (*reader, error) { return connect(c.rules, &c.overrides, c.name) }

// connect connects to the cluster of the kubeconfig (rules) and kubectl's
// flags (overrides) as the command name.
func connect(rules *clientcmd.ClientConfigLoadingRules, overrides *clientcmd.ConfigOverrides, name string) (*reader, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.UserAgent = "watcher-" + name
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), v1alpha1.AddToScheme(scheme)); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return &reader{c: cl, namespace: ns}, nil
}

// keySources say where explain looks for the key of the namespace
// explained, in this order.
type keySources struct {
	// given is the key given by --explain-key or $WATCHER_EXPLAIN_KEY
	// (hash.NamespaceKey.Encode); "": none.
	given string
	// secret names the Secret of the namespace explained that holds its
	// key (watcher key derive --write).
	secret string
	// watcherNamespace and hashKeySecret name the installation's key
	// Secret, from which the key of any namespace derives.
	watcherNamespace, hashKeySecret string
}

// hashKey finds the key of the namespace explained into s, or says in s why
// it cannot: then no hash is compared, and nothing fails. A key given
// explicitly must be valid and of that namespace, or the command fails.
func (r *reader) hashKey(ctx context.Context, s *explain.Settings, src keySources) error {
	if src.given != "" {
		k, err := hash.ParseNamespaceKey(src.given)
		if err != nil {
			return fmt.Errorf("the explain key given (--explain-key or $%s): %w", explainKeyEnv, err)
		}
		if k.Namespace() != r.namespace {
			return fmt.Errorf("the explain key given (--explain-key or $%s) is the key of namespace %s, not of %s", explainKeyEnv, k.Namespace(), r.namespace)
		}
		r.use(s, k)
		return nil
	}
	var sec corev1.Secret
	err := r.c.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: src.secret}, &sec)
	var k hash.NamespaceKey
	if err == nil {
		if k, err = hash.NamespaceKeyOf(&sec); err == nil {
			r.use(s, k)
			return nil
		}
	}
	nsProblem := fmt.Sprintf("cannot read the key Secret %s/%s: %v", r.namespace, src.secret, err)
	if apierrors.IsNotFound(err) {
		nsProblem = fmt.Sprintf("no key Secret %s/%s (watcher key derive --write makes it)", r.namespace, src.secret)
	}
	namespace, name := src.watcherNamespace, src.hashKeySecret
	sec = corev1.Secret{}
	err = r.c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &sec)
	var key []byte
	if err == nil {
		key, err = hash.KeyOf(&sec)
	}
	var problem string
	switch {
	case apierrors.IsNotFound(err):
		problem = fmt.Sprintf("no hash key Secret %s/%s (watcher never ran here, or runs in another namespace: --watcher-namespace)", namespace, name)
	case err != nil:
		problem = fmt.Sprintf("cannot read the hash key Secret %s/%s: %v", namespace, name, err)
	default:
		r.use(s, hash.NewHasher(key).NamespaceKey(r.namespace))
		return nil
	}
	// The installation's key first: what explain said before keys of
	// namespaces existed, and what scripts may look for.
	s.HashKeyProblem = problem + "; nor the key of namespace " + r.namespace + ": " + nsProblem
	return nil
}

// use hashes with k from now on.
func (r *reader) use(s *explain.Settings, k hash.NamespaceKey) {
	r.key = &k
	s.HashKeyID = k.ID()
}

// report is a report the commands print.
type report interface {
	WriteText(io.Writer) error
}

// explain reports on the object named by arg ("deployment/web").
func (r *reader) explain(ctx context.Context, s explain.Settings, arg string) (report, error) {
	kind, name, err := parseTarget(arg)
	if err != nil {
		return nil, err
	}
	if kind.config != "" {
		cfg := r.config(ctx, kind.config, r.namespace, name, true)
		if !cfg.Found && cfg.Unreadable == "" {
			return nil, fmt.Errorf("%s %s/%s not found", kind.config, r.namespace, name)
		}
		users, err := r.workloads(ctx, r.namespace)
		if err != nil {
			return nil, err
		}
		// What a change does to a user is decided with every object it
		// uses, as the controller decides it: those of its users are read,
		// once each.
		read := map[string]explain.Config{cfg.ID(): cfg}
		ws := make([]explain.Workload, 0, len(users))
		for _, u := range users {
			w := explain.Workload{Object: u, Configs: map[string]explain.Config{}}
			origins, err := s.Resolver.Explain(u, s.Configs)
			if err == nil && slices.ContainsFunc(origins, func(o resolve.Origin) bool { return o.Ref.ID() == cfg.ID() }) {
				for _, o := range origins {
					c, ok := read[o.Ref.ID()]
					if !ok {
						c = r.config(ctx, o.Ref.Kind, r.namespace, o.Ref.Name, true)
						read[o.Ref.ID()] = c
					}
					w.Configs[o.Ref.ID()] = c
				}
			}
			ws = append(ws, w)
		}
		return explain.ExplainConfig(s, cfg, ws), nil
	}
	obj := kind.workload.New()
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: name}, obj); err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", kind.workload.Name(), r.namespace, name, err)
	}
	w := explain.Workload{Object: obj, Configs: map[string]explain.Config{}}
	origins, err := s.Resolver.Explain(obj, s.Configs)
	if err != nil {
		return nil, err
	}
	for _, o := range origins {
		w.Configs[o.Ref.ID()] = r.config(ctx, o.Ref.Kind, r.namespace, o.Ref.Name, true)
	}
	var notes []string
	w.Events, notes = r.events(ctx, kind.workload, r.namespace, name)
	if err := r.pinFacts(ctx, &w); err != nil {
		notes = append(notes, "pins not checked (no snapshot taken for missing, no revision for pinned before): "+err.Error())
	}
	w.Producers = r.producers(ctx, r.namespace)
	rep, err := explain.ExplainWorkload(s, w)
	rep.Notes = append(rep.Notes, notes...)
	return rep, err
}

// producers reads the producers of the Secrets of namespace, of every kind
// watcher follows (package producer) whose API is served and which the
// reader may list, and judges them as the controller does.
func (r *reader) producers(ctx context.Context, namespace string) []producer.Verdict {
	var out []producer.Verdict
	for _, gvk := range producer.Kinds() {
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			continue // not served, or not readable: none known
		}
		for i := range list.Items {
			if v, ok := producer.Judge(&list.Items[i]); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// config reads one ConfigMap or Secret: whole when content is true (its
// keys hashed with the key of its namespace, if known, and dropped), else
// its metadata.
func (r *reader) config(ctx context.Context, kind refs.Kind, namespace, name string, content bool) explain.Config {
	cfg := explain.Config{Kind: kind, Namespace: namespace, Name: name}
	var obj client.Object = &metav1.PartialObjectMetadata{}
	obj.(*metav1.PartialObjectMetadata).SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(kind)))
	if content {
		obj = &corev1.ConfigMap{}
		if kind == refs.Secret {
			obj = &corev1.Secret{}
		}
	}
	err := r.c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return cfg
	case err != nil:
		cfg.Unreadable = err.Error()
		return cfg
	}
	cfg.Found, cfg.Annotations, cfg.Labels = true, obj.GetAnnotations(), obj.GetLabels()
	if sec, ok := obj.(*corev1.Secret); ok {
		cfg.Type = string(sec.Type)
	}
	cfg.SealedSecret = sealed.Owner(obj)
	ws := attribution.Of(obj)
	cfg.ChangedBy = attribution.Changed(ws, ws) // none moved: the newest writers
	if content {
		cfg.Keys, cfg.Sum = r.digest(obj)
	}
	return cfg
}

// digest returns the keys of a ConfigMap or Secret with their keyed hashes,
// or with empty hashes when the key of its namespace is unknown. The
// content is not kept.
func (r *reader) digest(obj client.Object) (map[string]string, string) {
	if r.key != nil {
		if d, err := r.key.OfObject(obj); err == nil { // fails for another namespace only
			return d.Keys, d.Sum
		}
	}
	keys := map[string]string{}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		for k := range o.Data {
			keys[k] = ""
		}
		for k := range o.BinaryData {
			keys[k] = ""
		}
	case *corev1.Secret:
		for k := range o.Data {
			keys[k] = ""
		}
	}
	return keys, ""
}

// workloads lists the workloads of every kind in namespace ("" for all).
// A kind whose API is not served (Argo Rollouts not installed) has none.
func (r *reader) workloads(ctx context.Context, namespace string) ([]client.Object, error) {
	var out []client.Object
	for _, k := range workload.Kinds {
		list := k.NewList()
		err := r.c.List(ctx, list, client.InNamespace(namespace))
		if meta.IsNoMatchError(err) || (k.Optional && apierrors.IsNotFound(err)) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", strings.ToLower(k.Name()), err)
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			obj := o.(client.Object)
			obj.GetObjectKind().SetGroupVersionKind(k.GVK)
			out = append(out, obj)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// events returns the restarts of a workload from its events.k8s.io Events,
// and a note when they cannot be read.
func (r *reader) events(ctx context.Context, kind workload.Kind, namespace, name string) ([]explain.Event, []string) {
	var list eventsv1.EventList
	err := r.c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFieldsSelector{
		Selector: fields.SelectorFromSet(fields.Set{"regarding.kind": kind.Name(), "regarding.name": name}),
	})
	if err != nil {
		return nil, []string{"cannot list its Events: " + err.Error()}
	}
	var out []explain.Event
	for _, e := range list.Items {
		if !slices.Contains(cause.Reasons, e.Reason) {
			continue
		}
		ev := explain.Event{Reason: e.Reason, Note: e.Note, Time: e.EventTime.Time, Count: 1}
		switch {
		case e.Series != nil:
			ev.Time, ev.Count = e.Series.LastObservedTime.Time, int(e.Series.Count)
		case ev.Time.IsZero():
			ev.Time = e.CreationTimestamp.Time
		}
		out = append(out, ev)
	}
	return out, nil
}

// graph reads the workloads of the namespace (or of all) and the metadata
// of the ConfigMaps and Secrets they use.
func (r *reader) graph(ctx context.Context, s explain.Settings, all bool) (explain.Graph, error) {
	ns := r.namespace
	if all {
		ns = ""
	}
	ws, err := r.workloads(ctx, ns)
	if err != nil {
		return explain.Graph{}, err
	}
	configs := map[string]explain.Config{}
	return explain.BuildGraph(s, ws, func(kind refs.Kind, namespace, name string) explain.Config {
		id := namespace + "/" + string(kind) + "/" + name
		c, ok := configs[id]
		if !ok {
			c = r.config(ctx, kind, namespace, name, false)
			configs[id] = c
		}
		return c
	}), nil
}

// lister lists the ConfigMaps or Secrets of a namespace, metadata only,
// once per kind and namespace: the resolver expands reload-list patterns
// against them (resolve.Configs).
type lister struct {
	ctx   context.Context
	c     client.Client
	lists map[string][]*packed.Object
}

// List implements resolve.Configs.
func (l *lister) List(kind refs.Kind, namespace string) ([]*packed.Object, error) {
	id := string(kind) + "/" + namespace
	if objs, ok := l.lists[id]; ok {
		return objs, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(kind) + "List"))
	if err := l.c.List(l.ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list %ss of %s: %w", strings.ToLower(string(kind)), namespace, err)
	}
	objs := make([]*packed.Object, 0, len(list.Items))
	for i := range list.Items {
		list.Items[i].Kind = string(kind)
		objs = append(objs, packed.Pack(&list.Items[i]))
	}
	l.lists[id] = objs
	return objs, nil
}

// policies reads the ReloadPolicies of namespace (every namespace when
// empty), as the controller's index holds them. A cluster without their
// CRD has none. A reader not allowed to list them gets none, and a warning
// on warn: the report leaves out what policies add.
func (r *reader) policies(ctx context.Context, namespace string, warn io.Writer) (*policy.Index, error) {
	ix := policy.NewIndex()
	var list v1alpha1.ReloadPolicyList
	err := r.c.List(ctx, &list, client.InNamespace(namespace))
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return ix, nil
	case apierrors.IsForbidden(err):
		fmt.Fprintf(warn, "warning: not allowed to list ReloadPolicies; what they add is left out\n")
		return ix, nil
	case err != nil:
		return nil, fmt.Errorf("list ReloadPolicies: %w", err)
	}
	for i := range list.Items {
		ix.Set(policy.Compile(&list.Items[i]))
	}
	return ix, nil
}

// rename makes r read the installation's annotation keys under watcher's
// (optin.Keys), as the controller's store does: what explain and graph
// read of each object is what the controller reads.
func (r *reader) rename(keys optin.Keys) {
	if len(keys) == 0 {
		return
	}
	c, ok := r.c.(client.WithWatch)
	if !ok {
		return
	}
	r.c = interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			keys.Rename(obj)
			return nil
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			return meta.EachListItem(list, func(o runtime.Object) error {
				if obj, ok := o.(client.Object); ok {
					keys.Rename(obj)
				}
				return nil
			})
		},
	})
}

// namespaceLabels reads the labels of namespaces, once each, for
// --namespace-selector. A namespace the user may not read is said once on
// warn, and taken as selected (explain.Settings.NamespaceLabels).
type namespaceLabels struct {
	ctx  context.Context
	c    client.Client
	warn io.Writer
	prog string
	read map[string]map[string]string
}

func (n *namespaceLabels) get(namespace string) (map[string]string, bool) {
	if l, ok := n.read[namespace]; ok {
		return l, l != nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := n.c.Get(n.ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		fmt.Fprintf(n.warn, "%s: whether namespace %s matches --namespace-selector is not known: %v\n", n.prog, namespace, err)
		n.read[namespace] = nil
		return nil, false
	}
	l := ns.Labels
	if l == nil {
		l = map[string]string{}
	}
	n.read[namespace] = l
	return l, true
}
