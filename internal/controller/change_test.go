package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/optin"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/settings"
	"github.com/watcher-dev/watcher/internal/store"
	"github.com/watcher-dev/watcher/internal/workload"
)

// explainCase is a generated namespace: a workload w using ConfigMap x
// (and maybe y), and a change of key of x. before are the objects as
// explain reads them, after those the controller decides from.
type explainCase struct {
	ns        string
	w         client.Object
	before    []*corev1.ConfigMap // x, then y if it exists
	after     *corev1.ConfigMap   // x changed
	key       string
	s         settings.Settings
	described string
}

// TestExplainIsTheDecision: what explain says a change of a ConfigMap's
// key does to a workload (ExplainConfig, from the objects before the
// change) is what the controller decides once the change comes (gather
// and plan.Decide, from its store), over generated workloads, records and
// changes: a restart, a template updated that rolls only when pods are
// deleted, or neither.
func TestExplainIsTheDecision(t *testing.T) {
	const n = 120
	rnd := rand.New(rand.NewPCG(29, 1))
	hasher := hash.NewHasher([]byte("explain-is-the-decision-key-0123"))
	variants := []settings.Settings{
		{Annotation: "require-restart", Discovery: plan.DiscoveryAll},
		{Annotation: "require-restart", Discovery: plan.DiscoveryAll, RestartOnCreate: true, ReloadOnDelete: true},
		{Annotation: "require-restart", Discovery: plan.DiscoveryAnnotated},
	}
	var cases []explainCase
	var objs []runtime.Object
	for i := range n {
		c := genExplainCase(rnd, fmt.Sprintf("p%d", i), hasher, variants[i%len(variants)])
		cases = append(cases, c)
		objs = append(objs, c.w.DeepCopyObject(), c.after.DeepCopy())
		for _, y := range c.before[1:] {
			objs = append(objs, y.DeepCopy())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.New(kubefake.NewClientset(objs...), store.Options{Hasher: hasher,
		WorkloadAnnotations: append([]string{"require-restart", plan.RecordAnnotation, plan.HashKeyAnnotation, plan.VersionAnnotation}, optin.WorkloadKeys...),
		ConfigAnnotations:   append([]string{"require-restart"}, optin.ConfigKeys...)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = st.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), st.HasSynced) {
		t.Fatal("store did not sync")
	}
	seen := map[string]int{}
	for _, c := range cases {
		r := &Reconciler{Store: st, Recorder: events.NewFakeRecorder(100), Config: Config{Settings: c.s, Hasher: hasher},
			resolve: c.s.Resolver(nil), rules: c.s.Rules()}
		kind, _ := workload.Of(c.w)
		key := workload.Key{Kind: kind.Name(), Namespace: c.ns, Name: c.w.GetName()}
		cached, err := st.Get(key.Kind, key.Namespace, key.Name)
		if err != nil || cached == nil {
			t.Fatalf("%s: not in the store: %v", key, err)
		}
		w, err := r.gather(ctx, key, cached)
		if err != nil {
			t.Fatal(err)
		}
		decided := controllerEffect(w, plan.Decide(w.in), c.key)

		nsKey := hasher.NamespaceKey(c.ns)
		es := explain.Settings{Resolver: c.s.Resolver(nil), Rules: c.s.Rules(), RestartOnCreate: c.s.RestartOnCreate,
			ReloadOnDelete: c.s.ReloadOnDelete, HashKeyID: nsKey.ID()}
		configs := map[string]explain.Config{}
		for _, cm := range c.before {
			d, err := nsKey.OfObject(cm)
			if err != nil {
				t.Fatal(err)
			}
			configs["ConfigMap/"+cm.Name] = explain.Config{Kind: refs.ConfigMap, Namespace: c.ns, Name: cm.Name, Found: true, Keys: d.Keys,
				Annotations: cm.Annotations, Labels: cm.Labels}
		}
		rep := explain.ExplainConfig(es, configs["ConfigMap/x"], []explain.Workload{{Object: c.w, Configs: configs}})
		said := explainEffect(rep, key, c.key)
		if said != decided {
			t.Errorf("%s: explain says %q, the controller decides %q\n%s", c.ns, said, decided, c.described)
		}
		seen[decided]++
	}
	for _, e := range []string{explain.EffectRestart, explain.EffectOnDelete, ""} {
		if seen[e] == 0 {
			t.Errorf("no case decided %q: the generator misses it (%v)", e, seen)
		}
	}
}

// controllerEffect is what the decision p, made by the controller from
// w, does for the change of key of ConfigMap x: restart, on-delete (the
// template updated, pods rolling only when deleted), or "".
func controllerEffect(w *gathered, p plan.Plan, key string) string {
	if p.Action != plan.Restart {
		return ""
	}
	i := slices.IndexFunc(w.in.Refs, func(r refs.Ref) bool { return r.ID() == "ConfigMap/x" })
	for _, c := range p.Changes {
		if c.Ref.ID() == "ConfigMap/x" && (slices.Contains(c.Keys, key) || (c.Keys == nil && i >= 0 && w.in.Refs[i].Uses(key))) {
			if w.onDelete != "" {
				return explain.EffectOnDelete
			}
			return explain.EffectRestart
		}
	}
	return ""
}

// explainEffect is what rep says a change of key does to the workload
// key: from its line in ByKey, else from NewKey and NewKeyOnDelete (a
// key nobody has).
func explainEffect(rep explain.ConfigReport, key workload.Key, k string) string {
	name := key.Kind + "/" + key.Name
	for _, e := range rep.ByKey {
		if e.Key != k {
			continue
		}
		switch {
		case slices.Contains(e.Restarts, name):
			return explain.EffectRestart
		case slices.Contains(e.OnDelete, name):
			return explain.EffectOnDelete
		}
		return ""
	}
	switch {
	case slices.Contains(rep.NewKey, name):
		return explain.EffectRestart
	case slices.Contains(rep.NewKeyOnDelete, name):
		return explain.EffectOnDelete
	}
	return ""
}

// genExplainCase generates a workload of namespace ns using ConfigMap x
// (a key of it, or every key), maybe ConfigMap y, with a record of what
// they held some time (maybe none, maybe made with another key), opt-outs
// and opt-ins, and a change of one key of x.
func genExplainCase(rnd *rand.Rand, ns string, hasher *hash.Hasher, s settings.Settings) explainCase {
	pick := func(n int) bool { return rnd.IntN(n) == 0 }
	value := func() string { return []string{"0", "1"}[rnd.IntN(2)] }
	data := func(keys ...string) map[string]string {
		d := map[string]string{}
		for _, k := range keys {
			if !pick(4) {
				d[k] = value()
			}
		}
		return d
	}
	cm := func(name string, d map[string]string) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: d}
		if pick(8) {
			c.Annotations = map[string]string{"require-restart": "false"}
		}
		return c
	}
	c := explainCase{ns: ns, s: s, key: []string{"a", "b", "c"}[rnd.IntN(3)]}
	x := cm("x", data("a", "b"))
	c.before = []*corev1.ConfigMap{x}
	var y *corev1.ConfigMap
	if !pick(3) {
		y = cm("y", data("a"))
		c.before = append(c.before, y)
	}
	c.after = x.DeepCopy()
	if c.after.Data == nil {
		c.after.Data = map[string]string{}
	}
	c.after.Data[c.key] = "2"

	// The pod template: x read whole, by one key (optional or not), or by
	// a volume item; y read whole, by a key, or not at all.
	ctr := corev1.Container{Name: "app", Image: "app"}
	var vols []corev1.Volume
	xKeys := []string{"a"}
	switch rnd.IntN(3) {
	case 0:
		ctr.EnvFrom = append(ctr.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}})
		xKeys = nil
	case 1:
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Key: "a", Optional: ptr.To(pick(2))}}})
	default:
		vols = append(vols, corev1.Volume{Name: "x", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Items: []corev1.KeyToPath{{Key: "b", Path: "b"}}}}})
		xKeys = []string{"b"}
	}
	yKeys := []string{"a"}
	switch rnd.IntN(3) {
	case 0:
		ctr.EnvFrom = append(ctr.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "y"}, Optional: ptr.To(pick(2))}})
		yKeys = nil
	case 1:
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "YA", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "y"}, Key: "a"}}})
	default:
		yKeys = []string{}
	}
	tmpl := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{ctr}, Volumes: vols}}

	// The record: none, made with another key, or of x and y as they were
	// some time (each entry maybe missing, or recorded as absent).
	ann := map[string]string{}
	rec := plan.Record{}
	entry := func(name string, keys []string) {
		switch {
		case pick(5):
			return // not recorded
		case pick(5):
			rec["ConfigMap/"+name] = nil // did not exist
			return
		}
		was := data("a", "b")
		bytes := map[string][]byte{}
		for k, v := range was {
			bytes[k] = []byte(v)
		}
		h := hasher.Of(hash.Source{Kind: "ConfigMap", Namespace: ns, Name: name}, bytes).Keys
		e := &plan.Entry{All: keys == nil, Keys: map[string]string{}}
		for k, v := range h {
			if keys == nil || slices.Contains(keys, k) {
				e.Keys[k] = v
			}
		}
		for _, k := range keys {
			if _, ok := e.Keys[k]; !ok {
				e.Keys[k] = ""
			}
		}
		rec["ConfigMap/"+name] = e
	}
	entry("x", xKeys)
	if len(yKeys) > 0 || yKeys == nil {
		entry("y", yKeys)
	}
	switch {
	case pick(6):
	case pick(8):
		ann[plan.RecordAnnotation], ann[plan.HashKeyAnnotation] = rec.String(), "0000000000000000"
	default:
		ann[plan.RecordAnnotation], ann[plan.HashKeyAnnotation] = rec.String(), hasher.ID()
	}
	switch {
	case pick(8):
		ann["require-restart"] = "false"
	case pick(3):
		ann[optin.ReloaderAuto] = "true"
	}
	meta := metav1.ObjectMeta{Namespace: ns, Name: "w", Annotations: ann}
	if pick(2) {
		c.w = &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Template: tmpl}}
	} else {
		sts := &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Template: tmpl}}
		if pick(2) {
			sts.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
		}
		c.w = sts
	}
	c.described = fmt.Sprintf("settings %+v\nx %v %v -> %v; y %v\nworkload %T %v\ncontainer %+v", s, x.Data, x.Annotations, c.after.Data, y, c.w, ann, ctr)
	return c
}
