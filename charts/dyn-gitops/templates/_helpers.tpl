{{- define "dyn-gitops.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dyn-gitops.fullname" -}}
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

{{- define "dyn-gitops.controllerName" -}}
{{- printf "%s-controller" (include "dyn-gitops.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dyn-gitops.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "dyn-gitops.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "dyn-gitops.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dyn-gitops.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "dyn-gitops.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dyn-gitops.controllerName" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespace the controller watches in namespace mode. */}}
{{- define "dyn-gitops.watchNamespace" -}}
{{- default .Release.Namespace .Values.controller.watchNamespace }}
{{- end }}

{{/* Where the leader-election Lease lives (the controller's own namespace in cluster mode). */}}
{{- define "dyn-gitops.leaseNamespace" -}}
{{- if eq .Values.controller.mode "namespace" }}
{{- include "dyn-gitops.watchNamespace" . }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/* What the controller reads and the few fields it writes (ownership table, docs/operator.md). */}}
{{- define "dyn-gitops.workloadRules" -}}
- apiGroups: [nvidia.com]
  resources: [dynamographdeploymentscalingadapters]
  verbs: [get, list, watch]
# patch: a Planner-scaled worker's replicas, written once from Git's seed when the DGD
# lacks it (conditional merge patch); nothing else of the DGD (Git's)
- apiGroups: [nvidia.com]
  resources: [dynamographdeployments]
  verbs: [get, list, watch, patch]
- apiGroups: [nvidia.com]
  resources: [dynamographdeployments/status, dynamographdeploymentscalingadapters/status]
  verbs: [get, patch]
# patch: spec.replicas and the restartAt pod-template annotation (server-side apply);
# delete: old worker generations after a managed rolling update. No create, no update.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, patch, delete]
# pods: list only (no get, no watch, never cached), and only while a worker service rolls:
# an old generation is scaled down only while the pods Ready now stay at the floor (a
# Deployment's status lags behind its pods); on Grove under OnDelete, a PodClique's pods by
# template hash while the controller replaces them (a surge through /scale: Grove's
# scale-in removes the old pod, the controller deletes none). No other verb on pods.
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
# events: create only, a Warning Event on a DGD whose reconcile the API server refused
# for good (422 Invalid, 403 Forbidden; the DGD's Stalled condition says the same)
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# multinode services (optional API; skipped when absent): status, and as for Deployments
# spec.replicas of a managed one (server-side apply) and delete of an old generation
- apiGroups: [leaderworkerset.x-k8s.io]
  resources: [leaderworkersets]
  verbs: [get, list, watch, patch, delete]
# Grove path (optional API; skipped when absent): status from what Grove creates from a
# PodCliqueSet, and their replicas through /scale (merge patch; under OnDelete one more
# pod of a PodClique while its pods are replaced).
- apiGroups: [grove.io]
  resources: [podcliques, podcliquescalinggroups]
  verbs: [get, list, watch]
- apiGroups: [grove.io]
  resources: [podcliques/scale, podcliquescalinggroups/scale]
  verbs: [get, patch]
# the PodCliqueSet (Git's): read with a GET only while a restart is under way (not
# watched), and patched (server-side apply) with nothing but the nvidia.com/restartAt
# annotations of the restarted cliques. No list, watch, create, update or delete.
- apiGroups: [grove.io]
  resources: [podcliquesets]
  verbs: [get, patch]
{{- if .Values.controller.dynamoModels.enabled }}
# DynamoModel: patch adds and removes our finalizer (conditional merge patch); status is
# ours; finalizers/update as the operator's role (owner-reference enforcement); the
# workers are the pods its base model's Service selects (read only: their IP and
# readiness), the Services for its ServicesFound condition (read only)
- apiGroups: [nvidia.com]
  resources: [dynamomodels]
  verbs: [get, list, watch, patch]
- apiGroups: [nvidia.com]
  resources: [dynamomodels/status]
  verbs: [get, patch]
- apiGroups: [nvidia.com]
  resources: [dynamomodels/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods, services]
  verbs: [get, list, watch]
{{- end }}
{{- if .Values.controller.renderArtifacts.enabled }}
# in-cluster rendering for Flux: the sources are read (their artifact is downloaded from
# source-controller); the ExternalArtifact of an annotated source is ours, status included
- apiGroups: [source.toolkit.fluxcd.io]
  resources: [gitrepositories, ocirepositories]
  verbs: [get, list, watch]
- apiGroups: [source.toolkit.fluxcd.io]
  resources: [externalartifacts]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [source.toolkit.fluxcd.io]
  resources: [externalartifacts/status]
  verbs: [get, patch]
{{- end }}
{{- end }}

{{/* The Service kustomize-controller downloads rendered artifacts from. */}}
{{- define "dyn-gitops.artifactService" -}}
{{- printf "%s-artifacts" (include "dyn-gitops.controllerName" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The CMP ConfigMap (plugin.yaml) in Argo CD's namespace. */}}
{{- define "dyn-gitops.cmpConfigMap" -}}
{{- printf "%s-cmp-plugin" (include "dyn-gitops.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* An image reference: repository@digest when image.digest is set (the tag is then
ignored), else repository:tag, the tag defaulting to the chart's appVersion.
Call with (dict "image" .Values.image "appVersion" $.Chart.AppVersion). */}}
{{- define "dyn-gitops.imageRef" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (default .appVersion .image.tag) }}
{{- end }}
{{- end }}
