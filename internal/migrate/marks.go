package migrate

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/watcher-dev/watcher/internal/workload"
)

// Reloader's marks of a reload on a workload's pod template (Reloader's
// internal/pkg/handler/upgrade.go): with the annotations strategy, the
// annotation LastReloadedFrom holds the JSON of what caused the last
// reload (type, name, namespace, hash, containerRefs, observedAt in Unix
// seconds); with env-vars (its default), a variable
// STAKATER_<NAME>_<CONFIGMAP|SECRET|SECRETPROVIDERCLASS> on the container
// using the object holds its hash, with no time. Reloader also emits a
// Normal Event ReasonReloaded (ReasonReloadFail when the update failed) on
// the workload.
const (
	LastReloadedFrom = "reloader.stakater.com/last-reloaded-from"
	EnvPrefix        = "STAKATER_"
	ReasonReloaded   = "Reloaded"
	ReasonReloadFail = "ReloadFail"
)

// envSuffixes are the kinds Reloader names at the end of its variables.
var envSuffixes = map[string]string{"_CONFIGMAP": "ConfigMap", "_SECRET": "Secret", "_SECRETPROVIDERCLASS": "SecretProviderClass"}

// Mark is one of Reloader's marks on a workload.
type Mark struct {
	// Via is where: "annotation reloader.stakater.com/last-reloaded-from"
	// or "env STAKATER_APP_CONFIG_CONFIGMAP".
	Via string `json:"via"`
	// Object is what Reloader reloaded for: "ConfigMap app-config" (the
	// annotation names it), or its kind alone (a variable holds the name
	// converted: upper case, underscores).
	Object string `json:"object"`
	// Time is when Reloader wrote it: the annotation's observedAt, else
	// the time of the last write by the field manager that owns the mark
	// (metadata.managedFields); zero when unknown.
	Time time.Time `json:"time,omitzero"`
}

// MarksOf returns Reloader's marks on the pod template of the workload obj.
func MarksOf(obj client.Object) []Mark {
	kind, ok := workload.Of(obj)
	if !ok {
		return nil
	}
	tmpl, err := kind.PodTemplate(obj)
	if err != nil || tmpl == nil {
		return nil
	}
	var out []Mark
	if v, ok := tmpl.Annotations[LastReloadedFrom]; ok {
		m := Mark{Via: "annotation " + LastReloadedFrom, Time: managed(obj, LastReloadedFrom)}
		var src struct {
			Type       string `json:"type"`
			Name       string `json:"name"`
			ObservedAt int64  `json:"observedAt"`
		}
		if json.Unmarshal([]byte(v), &src) == nil {
			m.Object = strings.TrimSpace(kindOf(src.Type) + " " + src.Name)
			if src.ObservedAt > 0 {
				m.Time = time.Unix(src.ObservedAt, 0).UTC()
			}
		}
		out = append(out, m)
	}
	seen := map[string]bool{}
	for _, cs := range [][]corev1.Container{tmpl.Spec.InitContainers, tmpl.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				name := e.Name
				if !strings.HasPrefix(name, EnvPrefix) || seen[name] {
					continue
				}
				for suffix, k := range envSuffixes {
					if strings.HasSuffix(name, suffix) && len(name) > len(EnvPrefix)+len(suffix) {
						seen[name] = true
						out = append(out, Mark{Via: "env " + name, Object: k, Time: managed(obj, name)})
					}
				}
			}
		}
	}
	return out
}

// kindOf names the kind Reloader writes in upper case ("CONFIGMAP").
func kindOf(t string) string {
	if k, ok := envSuffixes["_"+t]; ok {
		return k
	}
	return t
}

// managed returns the time of the newest write by a field manager owning
// a field that names name; zero when none does.
func managed(obj client.Object, name string) time.Time {
	var t time.Time
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 == nil || e.Time == nil || !bytes.Contains(e.FieldsV1.GetRawBytes(), []byte(name)) {
			continue
		}
		if e.Time.After(t) {
			t = e.Time.UTC()
		}
	}
	return t
}
