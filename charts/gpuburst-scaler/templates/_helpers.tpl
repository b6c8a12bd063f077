{{/* The scaler's Lease and status ConfigMap names are fixed in the scaler (scaler.permissions):
     one gpuburst-scaler per namespace. Object names default to the same name. */}}
{{- define "gpuburst-scaler.name" -}}gpuburst-scaler{{- end -}}

{{- define "gpuburst-scaler.fullname" -}}
{{- default (include "gpuburst-scaler.name" .) .Values.fullnameOverride -}}
{{- end -}}

{{- define "gpuburst-scaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuburst-scaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpuburst-scaler.labels" -}}
{{ include "gpuburst-scaler.selectorLabels" . }}
app.kubernetes.io/part-of: gpuburst
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpuburst-scaler.image" -}}
{{- $img := .Values.image -}}
{{- if $img.digest -}}
{{- if $img.tag -}}
{{- printf "%s:%s@%s" $img.repository $img.tag $img.digest -}}
{{- else -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- end -}}
{{- else -}}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{/* values.schema.json checks each value of `config` (generated from the scaler's model); this, the one
     rule of the chart's own: a scaler with neither pools nor discovery would have nothing to scale. */}}
{{- define "gpuburst-scaler.config" -}}
{{- $c := .Values.config -}}
{{- if and (not $c.discover) (not $c.pools) -}}{{- fail "config: give pools, or discover: true to adopt the groups tagged for cluster-autoscaler" -}}{{- end -}}
{{- toYaml $c -}}
{{- end -}}
