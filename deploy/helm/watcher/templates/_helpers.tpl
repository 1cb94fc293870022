{{/* The chart's name. */}}
{{- define "watcher.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of every object: the release's name if it holds the
chart's, else release-chart. The release "watcher" gives "watcher". */}}
{{- define "watcher.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "watcher.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "watcher.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: watcher
{{- end }}

{{/* Labels that select the pods: fixed for the life of a release. */}}
{{- define "watcher.selectorLabels" -}}
app.kubernetes.io/name: {{ include "watcher.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount's name. */}}
{{- define "watcher.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "watcher.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Lease's name. */}}
{{- define "watcher.leaseName" -}}
{{- default (include "watcher.fullname" .) .Values.lock.leaseName }}
{{- end }}

{{/*
The ConfigMap in which watcher publishes its settings for explain and
graph: LEASE_NAME-settings, where LEASE_NAME is set in the lease mode only
(else watcher's default, "watcher").
*/}}
{{- define "watcher.settingsName" -}}
{{- if eq .Values.lock.mode "lease" }}{{ include "watcher.leaseName" . }}{{ else }}watcher{{ end }}-settings
{{- end }}

{{/* The hash key Secret's name. */}}
{{- define "watcher.hashKeySecret" -}}
{{- default (printf "%s-hash-key" (include "watcher.fullname" .)) .Values.lock.hashKeySecret }}
{{- end }}

{{/* The alert URL's Secret, alerts.webhookURLSecret
("namespace/name:key"), as YAML: namespace, name. */}}
{{- define "watcher.alertURLSecret" -}}
{{- $nsName := index (splitList ":" .Values.alerts.webhookURLSecret) 0 }}
{{- $parts := splitList "/" $nsName }}
{{- if or (ne (len $parts) 2) (not (contains ":" .Values.alerts.webhookURLSecret)) (eq (index $parts 0) "") (eq (index $parts 1) "") }}
{{- fail (printf "alerts.webhookURLSecret must be namespace/name:key, not %q" .Values.alerts.webhookURLSecret) }}
{{- end }}
namespace: {{ index $parts 0 }}
name: {{ index $parts 1 }}
{{- end }}

{{/* "true" where the API server serves ValidatingAdmissionPolicy at
admissionregistration.k8s.io/v1 (Kubernetes 1.30 and later). helm install
and upgrade ask the API server; helm template knows only what
--api-versions tells it (admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy). */}}
{{- define "watcher.admissionPoliciesServed" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" }}true{{ end }}
{{- end }}

{{/* "true" where the API server serves MutatingAdmissionPolicy at
admissionregistration.k8s.io/v1 (Kubernetes 1.36 and later); with helm
template, pass --api-versions
admissionregistration.k8s.io/v1/MutatingAdmissionPolicy. */}}
{{- define "watcher.mutatingPoliciesServed" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" }}true{{ end }}
{{- end }}

{{/* "true" when pinned config revisions are installed: pinning.enabled,
on an API server that serves MutatingAdmissionPolicy (and so
ValidatingAdmissionPolicy). Only then are the admission policies of
pinning rendered and the rights to create and patch ConfigMaps and
Secrets granted; elsewhere watcher finds no policy and keeps pinning off. */}}
{{- define "watcher.pinning" -}}
{{- if and .Values.pinning.enabled (include "watcher.mutatingPoliciesServed" .) }}true{{ end }}
{{- end }}

{{/* The name of the MutatingAdmissionPolicy that pins pods, and of its
binding. */}}
{{- define "watcher.pinsPolicy" -}}
{{- default (printf "%s-pins" (include "watcher.fullname" .)) .Values.pinning.policyName }}
{{- end }}

{{/* The ServiceAccount's user name, as the API server knows it. */}}
{{- define "watcher.serviceAccountUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "watcher.serviceAccountName" .) }}
{{- end }}

{{/* The image reference: the digest wins over the tag. */}}
{{- define "watcher.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* One env var of watcher's, left out when its value is empty (an empty
string or list, or null); lists are joined with commas. Usage:
include "watcher.env" (list "NAME" value) */}}
{{- define "watcher.env" -}}
{{- $name := index . 0 }}
{{- $value := index . 1 }}
{{- if kindIs "slice" $value }}
{{- $value = join "," $value }}
{{- else if kindIs "map" $value }}
{{- $pairs := list }}
{{- range $k, $v := $value }}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) }}
{{- end }}
{{- $value = join "," $pairs }}
{{- end }}
{{- if not (or (kindIs "invalid" $value) (eq (toString $value) "")) }}
- name: {{ $name }}
  value: {{ toString $value | quote }}
{{- end }}
{{- end }}

{{/* The rules watcher needs wherever workloads are watched: read
ConfigMaps, Secrets and workloads, patch workloads (the restart), write
Events; read, patch (the record), delete and create Jobs (a Job's restart
re-creates it) while Jobs are watched, else create Jobs with the CronJob
trigger (get and delete the running ones of a concurrencyPolicy: Replace
CronJob); Argo Rollouts, ReloadPolicies and the CSI driver's pod statuses
(with get on pods and ReplicaSets) if enabled; with pinning, create and
patch ConfigMaps and Secrets (snapshots, and their owners: the policy
<fullname>-snapshots of pinning.yaml admits nothing else), read
ReplicaSets and ControllerRevisions, list pods (to find those of a
pinned revision that came up unpinned) and evict them (pods/eviction:
their controller re-creates them through the policy; the Eviction API
honours their PodDisruptionBudgets). Whether Jobs are watched, the
trigger, evict and CSI are on is read from extraArgs too (_args.tpl).
Nothing may update or delete a ConfigMap or a Secret, and no Pod is ever
created. */}}
{{- define "watcher.workloadRules" -}}
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [get, list, watch]
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets]
  verbs: [get, list, watch, patch]
- apiGroups: [batch]
  resources: [cronjobs]
  verbs: [get, list, watch, patch]
{{- if include "watcher.jobsWatched" . }}
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, patch, create, delete]
{{- else if include "watcher.cronjobTrigger" . }}
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create, get, delete]
{{- end }}
{{- if include "watcher.podEviction" . }}
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
- apiGroups: [apps]
  resources: [replicasets]
  verbs: [list]
{{- end }}
{{- if .Values.rbac.argoRollouts }}
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [get, list, watch, patch]
{{- end }}
{{- if .Values.rbac.sealedSecrets }}
- apiGroups: [bitnami.com]
  resources: [sealedsecrets]
  verbs: [get, list, watch]
{{- end }}
{{- if .Values.rbac.producers }}
- apiGroups: [external-secrets.io]
  resources: [externalsecrets]
  verbs: [get, list, watch]
{{- if .Values.rbac.refreshSiblings }}
- apiGroups: [external-secrets.io]
  resources: [externalsecrets]
  verbs: [patch]
{{- end }}
- apiGroups: [cert-manager.io]
  resources: [certificates]
  verbs: [get, list, watch]
{{- end }}
{{- if include "watcher.csi" . }}
- apiGroups: [secrets-store.csi.x-k8s.io]
  resources: [secretproviderclasspodstatuses]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
- apiGroups: [apps]
  resources: [replicasets]
  verbs: [get]
{{- end }}
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- if include "watcher.pinning" . }}
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [create, patch]
- apiGroups: [apps]
  resources: [replicasets, controllerrevisions]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
{{- end }}
{{- if .Values.rbac.reloadPolicies }}
- apiGroups: [watcher.dev]
  resources: [reloadpolicies]
  verbs: [list, watch]
- apiGroups: [watcher.dev]
  resources: [reloadpolicies/status]
  verbs: [patch]
{{- end }}
{{- end }}

{{/* With a namespace selector (only then), list and watch
namespaces, for their labels (the selector is applied by the API server). */}}
{{- define "watcher.namespaceRules" -}}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- end }}

{{/* The container's environment: watcher's settings from the values. */}}
{{- define "watcher.containerEnv" }}
- name: POD_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
{{- include "watcher.env" (list "DISCOVERY" .Values.discovery.mode) }}
{{- include "watcher.env" (list "NAMESPACES" .Values.discovery.namespaces) }}
{{- include "watcher.env" (list "NAMESPACE_SELECTOR" .Values.discovery.namespaceSelector) }}
{{- include "watcher.env" (list "IGNORE_CONFIGMAP_NAMESPACES" .Values.discovery.ignoreConfigMapNamespaces) }}
{{- include "watcher.env" (list "IGNORE_SECRET_NAMESPACES" .Values.discovery.ignoreSecretNamespaces) }}
{{- include "watcher.env" (list "IGNORE_WORKLOAD_KINDS" .Values.discovery.ignoreWorkloadKinds) }}
{{- include "watcher.env" (list "WORKLOAD_SELECTOR" .Values.discovery.workloadSelector) }}
{{- include "watcher.env" (list "CONFIG_SELECTOR" .Values.discovery.configSelector) }}
{{- include "watcher.env" (list "ANNOTATION" .Values.discovery.annotation) }}
{{- include "watcher.env" (list "ANNOTATION_KEYS" .Values.discovery.annotationKeys) }}
{{- include "watcher.env" (list "RESTART_STRATEGY" .Values.restart.strategy) }}
{{- include "watcher.env" (list "RELOAD_ON_CREATE" .Values.restart.reloadOnCreate) }}
{{- include "watcher.env" (list "RELOAD_ON_DELETE" .Values.restart.reloadOnDelete) }}
{{- include "watcher.env" (list "COALESCE" .Values.restart.coalesce) }}
{{- include "watcher.env" (list "COALESCE_MAX" .Values.restart.coalesceMax) }}
{{- include "watcher.env" (list "SETTLE" .Values.restart.settle) }}
{{- include "watcher.env" (list "SETTLE_MAX" .Values.restart.settleMax) }}
{{- include "watcher.env" (list "CRONJOB_TRIGGER" .Values.restart.cronjobTrigger) }}
{{- include "watcher.env" (list "WORKERS" .Values.restart.workers) }}
{{- include "watcher.env" (list "DRY_RUN" .Values.restart.dryRun) }}
{{- include "watcher.env" (list "CSI" .Values.csi.enabled) }}
{{- include "watcher.env" (list "RESTART_BUDGET" .Values.safety.restartBudget) }}
{{- include "watcher.env" (list "FLAP_THRESHOLD" .Values.safety.flapThreshold) }}
{{- include "watcher.env" (list "FLAP_QUIET" .Values.safety.flapQuiet) }}
{{- include "watcher.env" (list "MAX_CONCURRENT_ROLLOUTS" .Values.safety.maxConcurrentRollouts) }}
{{- include "watcher.env" (list "ROLLOUT_TIMEOUT" .Values.safety.rolloutTimeout) }}
{{- include "watcher.env" (list "ON_FAILED_ROLLOUT" .Values.safety.onFailedRollout) }}
{{- include "watcher.env" (list "PRODUCER_TIMEOUT" .Values.safety.producerTimeout) }}
{{- include "watcher.env" (list "ON_PRODUCER_TIMEOUT" .Values.safety.onProducerTimeout) }}
{{- include "watcher.env" (list "PINNING" .Values.pinning.enabled) }}
{{- include "watcher.env" (list "PINNING_POLICY" (include "watcher.pinsPolicy" .)) }}
{{- include "watcher.env" (list "PINNING_BUDGET" .Values.pinning.budget) }}
{{- include "watcher.env" (list "PINNING_GRACE" .Values.pinning.grace) }}
{{- include "watcher.env" (list "ALERT_ON_RELOAD" .Values.alerts.onReload) }}
{{- include "watcher.env" (list "ALERT_ON_HELD" .Values.alerts.onHeld) }}
{{- include "watcher.env" (list "ALERT_ON_FLAPPING" .Values.alerts.onFlapping) }}
{{- include "watcher.env" (list "ALERT_ON_FAILED_ROLLOUT" .Values.alerts.onFailedRollout) }}
{{- include "watcher.env" (list "ALERT_SINK" .Values.alerts.sink) }}
{{- include "watcher.env" (list "ALERT_ADDITIONAL_INFO" .Values.alerts.additionalInfo) }}
{{- include "watcher.env" (list "ALERT_WEBHOOK_URL" .Values.alerts.webhookURL) }}
{{- include "watcher.env" (list "ALERT_WEBHOOK_URL_SECRET" .Values.alerts.webhookURLSecret) }}
{{- include "watcher.env" (list "ALERT_WEBHOOK_PROXY" .Values.alerts.webhookProxy) }}
{{- include "watcher.env" (list "LOCK_BACKEND" .Values.lock.mode) }}
{{- include "watcher.env" (list "HASH_KEY_SECRET" (include "watcher.hashKeySecret" .)) }}
{{- if eq .Values.lock.mode "lease" }}
{{- include "watcher.env" (list "LEASE_NAME" (include "watcher.leaseName" .)) }}
{{- include "watcher.env" (list "LEASE_DURATION" .Values.lock.leaseDuration) }}
{{- include "watcher.env" (list "LEASE_RENEW_DEADLINE" .Values.lock.leaseRenewDeadline) }}
{{- include "watcher.env" (list "LEASE_RETRY_PERIOD" .Values.lock.leaseRetryPeriod) }}
{{- end }}
{{- if eq .Values.lock.mode "redis" }}
{{- with .Values.redis }}
{{- include "watcher.env" (list "REDIS_HOST" .host) }}
{{- include "watcher.env" (list "REDIS_PORT" .port) }}
{{- include "watcher.env" (list "DB" .db) }}
{{- include "watcher.env" (list "USERNAME" .username) }}
{{- if .existingSecret }}
- name: PASSWORD
  valueFrom: {secretKeyRef: {name: {{ .existingSecret }}, key: {{ .existingSecretPasswordKey }}}}
{{- end }}
{{- include "watcher.env" (list "REDIS_SOCKET_TIMEOUT" .socketTimeout) }}
{{- include "watcher.env" (list "LOCK_EXPIRATION_TIME" .lockExpirationTime) }}
{{- include "watcher.env" (list "REDIS_TLS" .tls.enabled) }}
{{- if .tls.caSecret }}
- name: REDIS_TLS_CA_FILE
  value: /etc/watcher/redis-ca/{{ .tls.caSecretKey }}
{{- end }}
{{- include "watcher.env" (list "REDIS_TLS_SERVER_NAME" .tls.serverName) }}
{{- include "watcher.env" (list "REDIS_SENTINEL_MASTER" .sentinel.master) }}
{{- include "watcher.env" (list "REDIS_SENTINEL_ADDRS" .sentinel.addrs) }}
{{- if .sentinel.existingSecret }}
- name: REDIS_SENTINEL_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ .sentinel.existingSecret }}, key: {{ .sentinel.existingSecretPasswordKey }}}}
{{- end }}
{{- end }}
{{- end }}
{{- include "watcher.env" (list "KUBE_API_QPS" .Values.kubeAPI.qps) }}
{{- include "watcher.env" (list "KUBE_API_BURST" .Values.kubeAPI.burst) }}
{{- include "watcher.env" (list "CACHE_SYNC_TIMEOUT" .Values.kubeAPI.cacheSyncTimeout) }}
{{- include "watcher.env" (list "LOG_FORMAT" .Values.logging.format) }}
{{- include "watcher.env" (list "LOG_LEVEL" .Values.logging.level) }}
{{- include "watcher.env" (list "PRINT_TIME" .Values.logging.printTime) }}
{{- include "watcher.env" (list "METRICS_ADDR" (printf ":%v" .Values.metrics.port)) }}
{{- include "watcher.env" (list "METRICS_BY_NAMESPACE" .Values.metrics.byNamespace) }}
{{- include "watcher.env" (list "HEALTH_ADDR" (printf ":%v" .Values.health.port)) }}
{{- include "watcher.env" (list "PPROF_ADDR" .Values.pprofAddr) }}
{{- /* Go's soft memory limit from the container's: the collector works
harder as the heap nears the limit instead of letting the kernel kill the
pod. An extraEnv GOMEMLIMIT, later in the list, wins. */}}
{{- if and .Values.resources .Values.resources.limits .Values.resources.limits.memory }}
- name: GOMEMLIMIT
  valueFrom: {resourceFieldRef: {resource: limits.memory}}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
