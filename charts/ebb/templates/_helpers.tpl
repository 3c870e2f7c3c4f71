{{/*
Names, labels, the image and the pod spec every ebb service shares.
*/}}

{{- define "ebb.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name: the release's name when it contains the chart's (a release `ebb` gives
`ebb-cluster-watcher`, ...), else release-chart. */}}
{{- define "ebb.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The name of one part: (dict "root" $ "part" "cluster-watcher") → ebb-cluster-watcher */}}
{{- define "ebb.partName" -}}
{{- printf "%s-%s" (include "ebb.fullname" .root) .part -}}
{{- end -}}

{{/* The labels that select a part's pods (immutable in a Deployment: the name only). */}}
{{- define "ebb.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ebb.partName" . }}
{{- end -}}

{{/* The labels of every object of a part. */}}
{{- define "ebb.labels" -}}
{{ include "ebb.selectorLabels" . }}
app.kubernetes.io/part-of: ebb
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- with .root.Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels of a part's workload and pods: with its component and version. */}}
{{- define "ebb.workloadLabels" -}}
{{ include "ebb.labels" . }}
app.kubernetes.io/component: {{ .part }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{- end -}}

{{/* metadata.annotations of every object (additionalAnnotations), with extra ones: (dict "root" $ "extra" map).
Called right after the labels, without nindent: it brings its own line break and indentation (none when empty). */}}
{{- define "ebb.annotations" -}}
{{- $all := merge (deepCopy (default dict .extra)) (deepCopy (default dict .root.Values.additionalAnnotations)) -}}
{{- with $all }}
  annotations:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end -}}

{{- define "ebb.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{- define "ebb.image" -}}
{{- $image := printf "%s:%s" .Values.image.repository (include "ebb.imageTag" .) -}}
{{- if .Values.image.digest -}}{{- $image = printf "%s@%s" $image .Values.image.digest -}}{{- end -}}
{{- $image -}}
{{- end -}}

{{/* The Kafka bootstrap servers as an env entry, when they come from a Secret: (dict "root" $ "var" "EBB_..._KAFKA_BOOTSTRAP") */}}
{{- define "ebb.kafkaEnv" -}}
{{- with .root.Values.kafka.existingSecret.name -}}
- name: {{ $.var }}
  valueFrom: {secretKeyRef: {name: {{ . }}, key: {{ $.root.Values.kafka.existingSecret.key }}}}
{{- end -}}
{{- end -}}

{{/* A service's ConfigMap data, as YAML: (dict "root" $ "prefix" "EBB_..._" "data" map "service" map). The
bootstrap servers are added unless they come from a Secret; the service's `config` values (keys without the
prefix) are added last, so they replace the chart's. */}}
{{- define "ebb.configData" -}}
{{- $data := deepCopy .data -}}
{{- if not .root.Values.kafka.existingSecret.name -}}
{{- $_ := set $data (printf "%sKAFKA_BOOTSTRAP" .prefix) .root.Values.kafka.bootstrapServers -}}
{{- end -}}
{{- range $key, $value := (default dict .service.config) -}}
{{- $_ := set $data (printf "%s%s" $.prefix $key) $value -}}
{{- end -}}
{{- $strings := dict -}}
{{- range $key, $value := $data -}}
{{- $_ := set $strings $key (toString $value) -}}
{{- end -}}
{{- toYaml $strings -}}
{{- end -}}

{{/* The database URL from its Secret: (dict "root" $ "var" "EBB_..._DATABASE_URL") */}}
{{- define "ebb.databaseEnv" -}}
- name: {{ .var }}
  valueFrom: {secretKeyRef: {name: {{ .root.Values.database.existingSecret.name }}, key: {{ .root.Values.database.existingSecret.key }}}}
{{- end -}}

{{/* The replicas of a service: its own, else the global one */}}
{{- define "ebb.replicas" -}}
{{- $own := .service.replicas -}}
{{- if kindIs "invalid" $own -}}{{ .root.Values.replicas }}{{- else -}}{{ $own }}{{- end -}}
{{- end -}}

{{/* Fills a pod (anti-)affinity term's or a spread constraint's missing labelSelector with the part's pod
labels, as Karpenter's chart does: (dict "root" $ "part" "...") → the affinity as YAML */}}
{{- define "ebb.affinity" -}}
{{- $selector := dict "matchLabels" (fromYaml (include "ebb.selectorLabels" .)) -}}
{{- $affinity := deepCopy (default dict .root.Values.affinity) -}}
{{- range $kind := list "podAffinity" "podAntiAffinity" -}}
{{- with (get $affinity $kind) -}}
{{- range $term := (default list (get . "requiredDuringSchedulingIgnoredDuringExecution")) -}}
{{- if not (hasKey $term "labelSelector") -}}{{- $_ := set $term "labelSelector" $selector -}}{{- end -}}
{{- end -}}
{{- range $weighted := (default list (get . "preferredDuringSchedulingIgnoredDuringExecution")) -}}
{{- $term := get $weighted "podAffinityTerm" -}}
{{- if not (hasKey $term "labelSelector") -}}{{- $_ := set $term "labelSelector" $selector -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $affinity }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{- define "ebb.topologySpreadConstraints" -}}
{{- $selector := dict "matchLabels" (fromYaml (include "ebb.selectorLabels" .)) -}}
{{- $constraints := list -}}
{{- range $c := (deepCopy (default list .root.Values.topologySpreadConstraints)) -}}
{{- if not (hasKey $c "labelSelector") -}}{{- $_ := set $c "labelSelector" $selector -}}{{- end -}}
{{- $constraints = append $constraints $c -}}
{{- end -}}
{{- with $constraints }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/*
The pod spec's scheduling and protection, shared by every Deployment: (dict "root" $ "part" "..." "service" map)
  priorityClassName (the service's, else the global one), nodeSelector, affinity, topologySpreadConstraints,
  tolerations, imagePullSecrets, the pod security context.
*/}}
{{- define "ebb.podScheduling" -}}
{{- $priority := default .root.Values.priorityClassName .service.priorityClassName -}}
{{- with $priority }}
priorityClassName: {{ . }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (include "ebb.affinity" .) }}
affinity:
  {{- . | nindent 2 }}
{{- end }}
{{- with (include "ebb.topologySpreadConstraints" .) }}
topologySpreadConstraints:
  {{- . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* The pod template's metadata: (dict "root" $ "part" "..." "checksum" "<hash of its configuration>") */}}
{{- define "ebb.podMetadata" -}}
labels:
  {{- include "ebb.workloadLabels" . | nindent 2 }}
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- $annotations := deepCopy (default dict .root.Values.podAnnotations) -}}
{{- with .checksum }}{{ $_ := set $annotations "checksum/config" . }}{{ end -}}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Every container's security context: nothing beyond the restricted Pod Security Standard. */}}
{{- define "ebb.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{/* A PodDisruptionBudget for a part: (dict "root" $ "part" "...") */}}
{{- define "ebb.podDisruptionBudget" -}}
{{- if .root.Values.podDisruptionBudget.enabled }}
---
# ebb's own pods are disrupted one at a time (a drain of their node waits for the others to be Ready)
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "ebb.partName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "ebb.labels" . | nindent 4 }}
  {{- include "ebb.annotations" (dict "root" .root) }}
spec:
  maxUnavailable: {{ .root.Values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "ebb.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/* The data of the ConfigMap ebb-engine-options (engine-options.yaml). */}}
{{- define "ebb.engineOptions" -}}
# a spot node may be replaced by a spot node
spotToSpot: {{ .Values.settings.featureGates.spotToSpotConsolidation | toString | quote }}
# the termination-executor's provider, and the planner's: with karpenter, a node without a NodeClaim is never
# proposed (and explanations say why)
provider: {{ .Values.provider }}
# every node left alone gets its cause (the planner's Events, the API's explanations)
explain: {{ .Values.settings.explain | toString | quote }}
{{- if ne (int .Values.settings.maxReplacements) 1 }}
# how many nodes one multi-node consolidation may launch (1, Karpenter's, when left out)
maxReplacements: {{ .Values.settings.maxReplacements | toString | quote }}
{{- end }}
{{- if ne .Values.settings.consolidationSearch "greedy" }}
# how multi-node consolidation finds its set (greedy, in candidate order, when left out)
consolidationSearch: {{ .Values.settings.consolidationSearch | quote }}
{{- end }}
{{- end -}}

{{/* The engine-options volume of the services that run the engine. */}}
{{- define "ebb.engineOptionsVolume" -}}
- name: engine-options
  configMap: {name: {{ include "ebb.partName" (dict "root" . "part" "engine-options") }}}
{{- end -}}
