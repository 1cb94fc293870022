package cli

import (
	"fmt"
	"strings"

	"github.com/watcher-dev/watcher/internal/refs"
	"github.com/watcher-dev/watcher/internal/workload"
)

// target is the kind of the object explained: a workload kind, or a
// ConfigMap or Secret.
type target struct {
	workload workload.Kind
	config   refs.Kind
}

// aliases are the names kubectl accepts for each kind, lower case.
var aliases = map[string]target{
	"deployment": {workload: workload.Deployment}, "deployments": {workload: workload.Deployment}, "deploy": {workload: workload.Deployment},
	"statefulset": {workload: workload.StatefulSet}, "statefulsets": {workload: workload.StatefulSet}, "sts": {workload: workload.StatefulSet},
	"daemonset": {workload: workload.DaemonSet}, "daemonsets": {workload: workload.DaemonSet}, "ds": {workload: workload.DaemonSet},
	"cronjob": {workload: workload.CronJob}, "cronjobs": {workload: workload.CronJob}, "cj": {workload: workload.CronJob},
	"job": {workload: workload.Job}, "jobs": {workload: workload.Job},
	"rollout": {workload: workload.Rollout}, "rollouts": {workload: workload.Rollout}, "ro": {workload: workload.Rollout},
	"configmap": {config: refs.ConfigMap}, "configmaps": {config: refs.ConfigMap}, "cm": {config: refs.ConfigMap},
	"secret": {config: refs.Secret}, "secrets": {config: refs.Secret},
}

// parseTarget reads KIND/NAME, KIND being any of kubectl's names for the
// kind (deployment, deploy, Deployment, deployments.apps...).
func parseTarget(arg string) (target, string, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return target{}, "", fmt.Errorf("want KIND/NAME, such as deployment/web or configmap/settings, not %q", arg)
	}
	kind, _, _ = strings.Cut(strings.ToLower(kind), ".") // deployments.apps
	t, ok := aliases[kind]
	if !ok {
		return target{}, "", fmt.Errorf("unknown kind %q: want a Deployment, StatefulSet, DaemonSet, CronJob, Job, Rollout, ConfigMap or Secret", kind)
	}
	return t, name, nil
}
