{{/*
Chart name, cut to 63 characters (a DNS label).
*/}}
{{- define "wpbench-k8s.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: release plus chart name unless the release already contains it; 63 characters at most.
*/}}
{{- define "wpbench-k8s.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
Labels on every object of the release.
*/}}
{{- define "wpbench-k8s.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "wpbench-k8s.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: wpbench-k8s
{{- end }}

{{/*
Selector labels of the controller pod (stable across upgrades).
*/}}
{{- define "wpbench-k8s.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wpbench-k8s.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{/*
The controller's ServiceAccount name.
*/}}
{{- define "wpbench-k8s.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "wpbench-k8s.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The controller image reference.
*/}}
{{- define "wpbench-k8s.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
This release's instance id (namespace/name: unique in the cluster), written into status.controller of each run
it accepts, and the name of the Lease its replicas elect a leader with.
*/}}
{{- define "wpbench-k8s.instance" -}}
{{- printf "%s/%s" .Release.Namespace .Release.Name }}
{{- end }}

{{- define "wpbench-k8s.leaseName" -}}
{{- printf "%s-leader" (include "wpbench-k8s.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
namespaces.selector as a label selector string (k=v,...), sorted.
*/}}
{{- define "wpbench-k8s.namespaceSelector" -}}
{{- $pairs := list }}
{{- range $k, $v := .Values.namespaces.selector }}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/*
The name of cluster-scoped objects of this release (its name and namespace).
*/}}
{{- define "wpbench-k8s.clusterName" -}}
{{- printf "%s-%s" (include "wpbench-k8s.fullname" .) .Release.Namespace | trunc 56 | trimSuffix "-" }}
{{- end }}
