package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SourceKind is the kind of a configuration object a policy watches.
// +kubebuilder:validation:Enum=ConfigMap;Secret
type SourceKind string

// The kinds of sources.
const (
	SourceConfigMap SourceKind = "ConfigMap"
	SourceSecret    SourceKind = "Secret"
)

// TargetKind is the kind of a workload a policy restarts: every kind watcher
// restarts.
// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet;CronJob;Rollout
type TargetKind string

// The kinds of targets.
const (
	TargetDeployment  TargetKind = "Deployment"
	TargetStatefulSet TargetKind = "StatefulSet"
	TargetDaemonSet   TargetKind = "DaemonSet"
	TargetCronJob     TargetKind = "CronJob"
	TargetRollout     TargetKind = "Rollout"
)

// Strategy is how a restart is written (see "Restart strategies" in
// docs/configuration.md).
// +kubebuilder:validation:Enum=annotation;env;restarted-at;evict
type Strategy string

// The restart strategies.
const (
	StrategyAnnotation  Strategy = "annotation"
	StrategyEnv         Strategy = "env"
	StrategyRestartedAt Strategy = "restarted-at"
	StrategyEvict       Strategy = "evict"
)

// Source selects ConfigMaps or Secrets of the policy's namespace, by name or
// by labels, whose changes restart the policy's targets.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="set exactly one of name or selector"
type Source struct {
	// Kind is ConfigMap or Secret.
	Kind SourceKind `json:"kind"`

	// Name is the name of one object; set either name or selector.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// Selector selects objects by label; set either name or selector.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Keys, when set, are the only keys whose changes count.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]+$`
	Keys []string `json:"keys,omitempty"`
}

// Target selects workloads of the policy's namespace, by name or by labels.
// It has no namespace: a policy cannot reach outside its own.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="set exactly one of name or selector"
type Target struct {
	// Kind is the workload's kind.
	Kind TargetKind `json:"kind"`

	// Name is the name of one workload; set either name or selector.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// Selector selects workloads by label; set either name or selector.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// MaintenanceWindow is a recurring period in which restarts may happen: it
// opens at each time of Schedule and stays open for Duration.
type MaintenanceWindow struct {
	// Schedule is a cron expression of 5 fields (minute, hour, day of month,
	// month, day of week). The API server checks its shape; the controller
	// parses it.
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.matches('^ *[0-9A-Za-z*/,?-]+( +[0-9A-Za-z*/,?-]+){4} *$')",message="schedule must be a cron expression of 5 fields (minute hour day-of-month month day-of-week)"
	Schedule string `json:"schedule"`

	// Duration is how long the window stays open; positive.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s')",message="duration must be positive, such as 30m or 1h"
	Duration metav1.Duration `json:"duration"`

	// TimeZone is the IANA time zone of Schedule, such as Europe/Berlin;
	// UTC when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`
	TimeZone string `json:"timeZone,omitempty"`
}

// ReloadPolicySpec says which configuration changes restart which workloads,
// and how.
type ReloadPolicySpec struct {
	// Sources are the ConfigMaps and Secrets whose changes count.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Sources []Source `json:"sources"`

	// Targets are the workloads to restart; when empty, the workloads whose
	// pod specs reference a source.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Targets []Target `json:"targets,omitempty"`

	// Strategy is how the targets are restarted; watcher's default
	// (--restart-strategy) when empty.
	// +optional
	Strategy Strategy `json:"strategy,omitempty"`

	// Coalesce, when set, makes the changes that arrive within this period,
	// counted from the first, a single restart; positive.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s')",message="coalesce must be a positive duration, such as 30s"
	Coalesce *metav1.Duration `json:"coalesce,omitempty"`

	// Settle, when set, makes the restart of a target wait until every
	// ConfigMap and Secret it reads has been quiet this long, so that a
	// change written in parts rolls out once (watcher's --settle, which a
	// target's watcher.dev/settle annotation still overrides); at most 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('1h')",message="settle must be a positive duration of at most 1h, such as 1m"
	Settle *metav1.Duration `json:"settle,omitempty"`

	// SettleMax, when set, is the longest a target's restart waits for its
	// whole change, from the first change (watcher's --settle-max; a
	// target's watcher.dev/settle-max still overrides it); at most 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') && duration(self) > duration('0s') && duration(self) <= duration('1h')",message="settleMax must be a positive duration of at most 1h, such as 5m"
	SettleMax *metav1.Duration `json:"settleMax,omitempty"`

	// Pin, when true, pins the targets' config revisions, as their
	// watcher.dev/pin: "true" annotation does: each restart copies the
	// ConfigMaps and Secrets they read into immutable snapshots their new
	// pods read, so that a rollback brings the config back with the code
	// (watcher's --pinning must allow it; see docs/revisions.md).
	// +optional
	Pin bool `json:"pin,omitempty"`

	// MaintenanceWindows, when set, hold restarts until a window is open.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	MaintenanceWindows []MaintenanceWindow `json:"maintenanceWindows,omitempty"`

	// DryRun logs and reports what would be restarted and changes nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// PendingRestart is a restart that is due but held back.
type PendingRestart struct {
	// Kind is the workload's kind.
	Kind TargetKind `json:"kind"`
	// Name is the workload's name.
	Name string `json:"name"`
	// Since is when the restart became due.
	Since metav1.Time `json:"since"`
	// Reason says what holds it, such as MaintenanceWindow.
	Reason string `json:"reason"`
}

// Restart is a restart the policy caused.
type Restart struct {
	// Kind is the workload's kind.
	Kind TargetKind `json:"kind"`
	// Name is the workload's name.
	Name string `json:"name"`
	// At is when the workload was restarted.
	At metav1.Time `json:"at"`
	// Sources are the changed sources, as Kind/name.
	// +optional
	Sources []string `json:"sources,omitempty"`
}

// ReloadPolicyStatus is what the controller last observed and did.
type ReloadPolicyStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are the policy's conditions, such as Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Pending are the restarts that are due but held back.
	// +optional
	Pending []PendingRestart `json:"pending,omitempty"`

	// LastRestarts are the latest restarts the policy caused.
	// +optional
	LastRestarts []Restart `json:"lastRestarts,omitempty"`
}

// ReloadPolicy restarts workloads of its namespace when ConfigMaps or Secrets
// it lists change.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Dry run",type=boolean,JSONPath=`.spec.dryRun`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ReloadPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ReloadPolicySpec   `json:"spec"`
	Status ReloadPolicyStatus `json:"status,omitempty"`
}

// ReloadPolicyList is a list of ReloadPolicies.
// +kubebuilder:object:root=true
type ReloadPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReloadPolicy `json:"items"`
}
