{{/*
Names and labels. Every object is named <fullname>-<controller> (cluster, auth, jetstream);
fullname is the release name, or <release>-<chart name> when the release name does not contain
the chart name (Helm's usual rule), cut to 63 characters less room for the suffix.
*/}}

{{- define "nats-operators.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "nats-operators.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The controllers, in the order every template renders them. */}}
{{- define "nats-operators.controllers" -}}
cluster auth jetstream
{{- end }}

{{/* The labels every object carries. */}}
{{- define "nats-operators.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "nats-operators.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nats-operators
{{- end }}

{{/*
One controller's context: (dict "root" $ "name" "cluster"). Its values are
.Values.controllers.<name>.
*/}}
{{- define "nats-operators.componentLabels" -}}
{{ include "nats-operators.labels" .root }}
app.kubernetes.io/component: {{ .name }}-controller
{{- end }}

{{- define "nats-operators.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nats-operators.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}-controller
{{- end }}

{{- define "nats-operators.componentName" -}}
{{ include "nats-operators.fullname" .root }}-{{ .name }}
{{- end }}

{{- define "nats-operators.serviceAccountName" -}}
{{- $sa := (index .root.Values.controllers .name).serviceAccount }}
{{- if $sa.create }}
{{- default (include "nats-operators.componentName" .) $sa.name }}
{{- else }}
{{- required (printf "controllers.%s.serviceAccount.name is required when serviceAccount.create is false" .name) $sa.name }}
{{- end }}
{{- end }}

{{/*
An image reference from {repository, tag, digest}: repository@digest when a digest is given (it
wins over any tag), else repository:tag, the tag defaulting to `fallback` (image.tag, then the
chart's appVersion).
*/}}
{{- define "nats-operators.image" -}}
{{- $image := .image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default .fallback $image.tag | toString) }}
{{- end }}
{{- end }}

{{/* The first of a controller's own value and the shared one that is not empty. */}}
{{- define "nats-operators.podValue" -}}
{{- $own := index (index .root.Values.controllers .name) .key }}
{{- $shared := index .root.Values .key }}
{{- if $own }}{{ toYaml $own }}{{ else if $shared }}{{ toYaml $shared }}{{ end }}
{{- end }}
