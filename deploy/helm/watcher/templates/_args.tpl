{{/*
The settings that decide the rights watcher needs, as watcher itself reads
them: a flag of extraArgs (watcher's own, or Reloader's that maps onto it)
wins over the value that sets its environment variable, so that the RBAC
follows the arguments of a Reloader Deployment copied into extraArgs with
no value to set beside them.

  setting                 extraArgs read (the last one given wins)
  CSI                     --csi, else --enable-csi-integration (true, or
                          csi.enabled)
  Jobs watched            --ignore-workload-kinds (without Job), else
                          --ignored-workload-types (without jobs), else
                          discovery.ignoreWorkloadKinds (without Job)
  the CronJob trigger     --cronjob-trigger
  the evict strategy      --restart-strategy
  the namespace selector  --namespace-selector

Each helper prints "true" or nothing.
*/}}

{{/* The last of the flag name (without dashes) in extraArgs, as JSON
{"given": bool, "value": string}: --name=value, or --name value. For a
boolean (a third element, "bool"), --name alone is "true", and the next
argument is its value only if it is one. Usage:
include "watcher.arg" (list .Values.extraArgs "csi" "bool") | fromJson */}}
{{- define "watcher.arg" -}}
{{- $args := index . 0 | default (list) }}
{{- $flag := printf "--%s" (index . 1) }}
{{- $isBool := eq (len .) 3 }}
{{- $out := dict "given" false "value" "" }}
{{- range $i, $a := $args }}
{{- $a = toString $a }}
{{- if eq $a $flag }}
{{- $next := "" }}
{{- if lt (add1 $i) (len $args) }}
{{- $next = toString (index $args (add1 $i)) }}
{{- end }}
{{- if and $isBool (not (include "watcher.isBool" $next)) }}
{{- $next = "true" }}
{{- end }}
{{- $_ := set $out "given" true }}
{{- $_ := set $out "value" $next }}
{{- else if hasPrefix (printf "%s=" $flag) $a }}
{{- $_ := set $out "given" true }}
{{- $_ := set $out "value" (trimPrefix (printf "%s=" $flag) $a | trimAll "\"") }}
{{- end }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* "true" if the string is a boolean as Go's strconv.ParseBool reads it. */}}
{{- define "watcher.isBool" -}}
{{- if has . (list "1" "t" "T" "TRUE" "true" "True" "0" "f" "F" "FALSE" "false" "False") }}true{{ end }}
{{- end }}

{{/* "true" if the string is a true boolean (strconv.ParseBool). */}}
{{- define "watcher.isTrue" -}}
{{- if has . (list "1" "t" "T" "TRUE" "true" "True") }}true{{ end }}
{{- end }}

{{/* CSI: --csi if given, else csi.enabled or a true
--enable-csi-integration (Reloader's flag). */}}
{{- define "watcher.csi" -}}
{{- $own := include "watcher.arg" (list .Values.extraArgs "csi" "bool") | fromJson }}
{{- $reloader := include "watcher.arg" (list .Values.extraArgs "enable-csi-integration" "bool") | fromJson }}
{{- if $own.given }}
{{- include "watcher.isTrue" $own.value }}
{{- else if or .Values.csi.enabled (include "watcher.isTrue" $reloader.value) }}true
{{- end }}
{{- end }}

{{/* Jobs watched (and restarted by re-creation): Job is not among the
ignored kinds of --ignore-workload-kinds if given, else of Reloader's
--ignored-workload-types (jobs) if given, else of
discovery.ignoreWorkloadKinds. */}}
{{- define "watcher.jobsWatched" -}}
{{- $own := include "watcher.arg" (list .Values.extraArgs "ignore-workload-kinds") | fromJson }}
{{- $reloader := include "watcher.arg" (list .Values.extraArgs "ignored-workload-types") | fromJson }}
{{- $ignored := .Values.discovery.ignoreWorkloadKinds }}
{{- if $own.given }}
{{- $ignored = splitList "," $own.value }}
{{- else if $reloader.given }}
{{- $ignored = list }}
{{- range splitList "," $reloader.value }}
{{- if eq (lower (trim .)) "jobs" }}{{ $ignored = list "Job" }}{{ end }}
{{- end }}
{{- end }}
{{- $job := false }}
{{- range $ignored }}
{{- if eq (trim (toString .)) "Job" }}{{ $job = true }}{{ end }}
{{- end }}
{{- if not $job }}true{{ end }}
{{- end }}

{{/* The CronJob trigger: --cronjob-trigger if given, else
restart.cronjobTrigger. */}}
{{- define "watcher.cronjobTrigger" -}}
{{- $own := include "watcher.arg" (list .Values.extraArgs "cronjob-trigger" "bool") | fromJson }}
{{- if $own.given }}
{{- include "watcher.isTrue" $own.value }}
{{- else if .Values.restart.cronjobTrigger }}true
{{- end }}
{{- end }}

{{/* The evict strategy's rights: rbac.podEviction, or evict as the
default strategy (--restart-strategy if given, else restart.strategy). */}}
{{- define "watcher.podEviction" -}}
{{- $own := include "watcher.arg" (list .Values.extraArgs "restart-strategy") | fromJson }}
{{- $strategy := .Values.restart.strategy }}
{{- if $own.given }}{{ $strategy = $own.value }}{{ end }}
{{- if or .Values.rbac.podEviction (eq (lower (trim $strategy)) "evict") }}true{{ end }}
{{- end }}

{{/* A namespace selector: --namespace-selector if given, else
discovery.namespaceSelector. */}}
{{- define "watcher.namespaceSelector" -}}
{{- $own := include "watcher.arg" (list .Values.extraArgs "namespace-selector") | fromJson }}
{{- $sel := .Values.discovery.namespaceSelector }}
{{- if $own.given }}{{ $sel = $own.value }}{{ end }}
{{- if $sel }}true{{ end }}
{{- end }}
