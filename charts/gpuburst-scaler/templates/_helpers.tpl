{{/* The scaler's Lease and status ConfigMap names are fixed in the scaler (scaler.permissions):
     one gpuburst-scaler per namespace. Object names follow them. */}}
{{- define "gpuburst-scaler.name" -}}gpuburst-scaler{{- end -}}

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
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $img.digest) -}}
{{- fail (printf "image.digest: %q is not sha256:<64 hex digits>" $img.digest) -}}
{{- end -}}
{{- if $img.tag -}}
{{- printf "%s:%s@%s" $img.repository $img.tag $img.digest -}}
{{- else -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- end -}}
{{- else -}}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{- define "gpuburst-scaler.config" -}}
{{- $c := .Values.config -}}
{{- if not $c.cluster -}}{{- fail "config.cluster: set the cluster's name (its cluster-autoscaler tags carry it)" -}}{{- end -}}
{{- if not (has $c.cloud (list "aws" "azure")) -}}{{- fail (printf "config.cloud: must be aws or azure (got %q)" $c.cloud) -}}{{- end -}}
{{- if and (not $c.discover) (not $c.pools) -}}{{- fail "config: give pools, or discover: true to adopt the groups tagged for cluster-autoscaler" -}}{{- end -}}
{{- toYaml $c -}}
{{- end -}}
