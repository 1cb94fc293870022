package explain_test

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/explain"
	"github.com/watcher-dev/watcher/internal/hash"
	"github.com/watcher-dev/watcher/internal/plan"
	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/resolve"
)

// hasher is the installation's hash key in these tests.
var hasher = hash.NewHasher([]byte("explain-test-hash-key-0123456789"))

const ns = "shop"

// The values of the scenario's Secret: no report may show them.
const (
	secretValue    = "hunter2-very-secret"
	oldSecretValue = "hunter1-old-secret"
)

func settings() explain.Settings {
	return explain.Settings{
		Resolver:  resolve.Standard(resolve.Settings{}),
		Rules:     plan.NewChain(plan.Options{OptOutAnnotation: "require-restart", Discovery: plan.DiscoveryAll}),
		HashKeyID: hasher.ID(),
	}
}

func configMap(name string, data map[string]string, ann map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}, Data: data}
}

func secret(name string, data map[string]string, ann map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// config returns what the command reads of obj: its keys and their hashes.
func config(obj client.Object) explain.Config {
	d, err := hasher.OfObject(obj)
	if err != nil {
		panic(err)
	}
	kind := refs.ConfigMap
	if _, ok := obj.(*corev1.Secret); ok {
		kind = refs.Secret
	}
	return explain.Config{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Found: true, Keys: d.Keys,
		Annotations: obj.GetAnnotations(), Labels: obj.GetLabels()}
}

func absent(kind refs.Kind, name string) explain.Config {
	return explain.Config{Kind: kind, Namespace: ns, Name: name}
}

// record returns the record of a workload whose pods read keys of each
// object as they are in objs (every key when keys is nil).
func record(entries map[client.Object][]string) string {
	r := plan.Record{}
	for obj, keys := range entries {
		c := config(obj)
		e := &plan.Entry{All: keys == nil, Keys: map[string]string{}}
		for k, h := range c.Keys {
			if keys == nil {
				e.Keys[k] = h
			}
		}
		for _, k := range keys {
			e.Keys[k] = c.Keys[k]
		}
		r[c.ID()] = e
	}
	return r.String()
}

func recorded(rec string) map[string]string {
	return map[string]string{plan.RecordAnnotation: rec, plan.HashKeyAnnotation: hasher.ID()}
}

func envKey(kind refs.Kind, env, name, key string) corev1.EnvVar {
	e := corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{}}
	if kind == refs.Secret {
		e.ValueFrom.SecretKeyRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
	} else {
		e.ValueFrom.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
	}
	return e
}

func fromCM(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

func fromSecret(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

func template(c corev1.Container, vols ...corev1.Volume) corev1.PodTemplateSpec {
	c.Name, c.Image = "app", "registry.example/app:1"
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: vols}}
}

func deployment(name string, ann map[string]string, tmpl corev1.PodTemplateSpec) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann, Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{Template: tmpl}}
}

// scenario is a small namespace: the objects and what the command reads.
type scenario struct {
	appConfig, appConfigOld *corev1.ConfigMap
	db, dbOld               *corev1.Secret
	web                     *appsv1.Deployment
	cache                   *appsv1.StatefulSet
	agent                   *appsv1.DaemonSet
	report                  *batchv1.CronJob
	configs                 map[string]explain.Config
	events                  []explain.Event
}

// newScenario: Deployment web reads LOG_LEVEL (env) and PORT (a volume
// item) of ConfigMap app-config and every key of Secret db, which opts out;
// LOG_LEVEL and the password changed since its record. StatefulSet cache
// (OnDelete, never adopted) reads every key of app-config. DaemonSet agent
// opts out. CronJob report names db in its reload list and reads the
// absent ConfigMap gone.
func newScenario() *scenario {
	s := &scenario{
		appConfig:    configMap("app-config", map[string]string{"LOG_LEVEL": "debug", "PORT": "8080"}, nil),
		appConfigOld: configMap("app-config", map[string]string{"LOG_LEVEL": "info", "PORT": "8080"}, nil),
		db:           secret("db", map[string]string{"password": secretValue}, map[string]string{"require-restart": "false"}),
		dbOld:        secret("db", map[string]string{"password": oldSecretValue}, map[string]string{"require-restart": "false"}),
	}
	vol := corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Items: []corev1.KeyToPath{{Key: "PORT", Path: "port"}},
	}}}
	s.web = deployment("web", recorded(record(map[client.Object][]string{s.appConfigOld: {"LOG_LEVEL", "PORT"}, s.dbOld: nil})),
		template(corev1.Container{Env: []corev1.EnvVar{envKey(refs.ConfigMap, "LOG_LEVEL", "app-config", "LOG_LEVEL")}, EnvFrom: []corev1.EnvFromSource{fromSecret("db")}}, vol))
	s.cache = &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}, Spec: appsv1.StatefulSetSpec{
		Template:       template(corev1.Container{EnvFrom: []corev1.EnvFromSource{fromCM("app-config")}}),
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
	}}
	s.agent = &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent", Annotations: map[string]string{"require-restart": "false"}},
		Spec: appsv1.DaemonSetSpec{Template: template(corev1.Container{EnvFrom: []corev1.EnvFromSource{fromCM("app-config")}})}}
	s.report = &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "report", Annotations: map[string]string{"secret.reloader.stakater.com/reload": "db"}},
		Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: template(corev1.Container{Env: []corev1.EnvVar{envKey(refs.ConfigMap, "MODE", "gone", "mode")}}),
		}}}}
	s.report.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef.Optional = ptr.To(true)
	s.configs = map[string]explain.Config{
		"ConfigMap/app-config": config(s.appConfig),
		"Secret/db":            config(s.db),
		"ConfigMap/gone":       absent(refs.ConfigMap, "gone"),
	}
	at := time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC)
	s.events = []explain.Event{
		{Time: at, Reason: "Restarted", Note: "Restarted because ConfigMap app-config changed (keys: PORT; 1a2b3c4d→5e6f7a8b)", Count: 1},
		{Time: at.Add(2 * time.Hour), Reason: "Restarted", Note: "Restarted because ConfigMap app-config changed (keys: LOG_LEVEL; 5e6f7a8b→9c0d1e2f)", Count: 2},
	}
	return s
}

func (s *scenario) workloads() []explain.Workload {
	var out []explain.Workload
	for _, obj := range []client.Object{s.web, s.cache, s.agent, s.report} {
		w := explain.Workload{Object: obj, Configs: s.configs}
		if obj == s.web {
			w.Events = s.events
		}
		out = append(out, w)
	}
	return out
}

func (s *scenario) objects() []client.Object {
	return []client.Object{s.web, s.cache, s.agent, s.report}
}
