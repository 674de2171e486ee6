"""Every label, annotation and well-known name key, in one place.

Dynamo keys reproduce the operator's `internal/consts`; ``dyn-gitops.io/`` keys are ours.
"""

from __future__ import annotations

from typing import Final

# --- Dynamo labels -------------------------------------------------------------------------
LABEL_GRAPH_NAME: Final = "nvidia.com/dynamo-graph-deployment-name"
LABEL_COMPONENT: Final = "nvidia.com/dynamo-component"
LABEL_DYNAMO_NAMESPACE: Final = "nvidia.com/dynamo-namespace"
LABEL_COMPONENT_TYPE: Final = "nvidia.com/dynamo-component-type"
LABEL_SUB_COMPONENT_TYPE: Final = "nvidia.com/dynamo-sub-component-type"
LABEL_COMPONENT_CLASS: Final = "nvidia.com/dynamo-component-class"
LABEL_SELECTOR: Final = "nvidia.com/selector"
LABEL_WORKER_HASH: Final = "nvidia.com/dynamo-worker-hash"
LABEL_METRICS_ENABLED: Final = "nvidia.com/metrics-enabled"
LABEL_DISCOVERY_BACKEND: Final = "nvidia.com/dynamo-discovery-backend"
LABEL_DISCOVERY_ENABLED: Final = "nvidia.com/dynamo-discovery-enabled"
LABEL_BASE_MODEL_HASH: Final = "nvidia.com/dynamo-base-model-hash"
LABEL_MANAGED_BY_DYNAMO: Final = "nvidia.com/managed-by"
LABEL_APP_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
LABEL_APP_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_APP_NAME: Final = "app.kubernetes.io/name"
#: LeaderWorkerSet pod templates: leader | worker (the multinode Service selects leaders)
LABEL_ROLE: Final = "role"
#: the LeaderWorkerSet controller's label on every pod of a set (leader and workers)
LABEL_LWS_NAME: Final = "leaderworkerset.sigs.k8s.io/name"
#: the replica index on the per-replica LeaderWorkerSets and PodGroups of operators before
#: native LWS scaling (#9612, v1.2); never rendered now (the operator deletes those objects)
LABEL_INSTANCE_ID: Final = "instance-id"
#: Grove cliques under the Kai scheduler: the Kai queue
LABEL_KAI_QUEUE: Final = "kai.scheduler/queue"

# --- Dynamo annotations --------------------------------------------------------------------
ANN_ENABLE_METRICS: Final = "nvidia.com/enable-metrics"
ANN_DISCOVERY_BACKEND: Final = "nvidia.com/dynamo-discovery-backend"
ANN_KUBE_DISCOVERY_MODE: Final = "nvidia.com/dynamo-kube-discovery-mode"
ANN_OPERATOR_ORIGIN_VERSION: Final = "nvidia.com/dynamo-operator-origin-version"
ANN_VLLM_EXECUTOR_BACKEND: Final = "nvidia.com/vllm-distributed-executor-backend"
ANN_ENABLE_GROVE: Final = "nvidia.com/enable-grove"
ANN_GROVE_UPDATE_STRATEGY: Final = "nvidia.com/grove-update-strategy"
#: Grove's pod labels (operator/api/common/labels.go): the PodClique a pod belongs to and the
#: hash of the pod template it was created from (read by the controller's OnDelete surge)
LABEL_GROVE_PODCLIQUE: Final = "grove.io/podclique"
LABEL_GROVE_POD_TEMPLATE_HASH: Final = "grove.io/pod-template-hash"
ANN_WORKLOAD_PROVIDER: Final = "nvidia.com/workload-provider"
#: the operator's conversion keeps v1alpha1-only fields of a DGD here, as a JSON payload
#: (``api/v1alpha1/dynamographdeployment_conversion.go`` @ 2a6da14c8)
ANN_DGD_SPEC: Final = "nvidia.com/dgd-spec"
ANN_RESTART_AT: Final = "nvidia.com/restartAt"
ANN_BASE_MODEL: Final = "nvidia.com/dynamo-base-model"
#: the operator's common finalizer (DGD, DCD, DynamoModel: ``consts.FinalizerName``)
FINALIZER: Final = "nvidia.com/finalizer"
ANN_DEPLOYMENT_STRATEGY: Final = "nvidia.com/deployment-strategy"
ANN_MAX_SURGE: Final = "nvidia.com/deployment-rolling-update-max-surge"
ANN_MAX_UNAVAILABLE: Final = "nvidia.com/deployment-rolling-update-max-unavailable"
ANN_DISABLE_PULL_SECRET_DISCOVERY: Final = "nvidia.com/disable-image-pull-secret-discovery"
ANN_ISTIO_INJECT: Final = "sidecar.istio.io/inject"
#: DGD metadata: the Kai scheduler queue of its Grove cliques (default "dynamo")
ANN_KAI_QUEUE: Final = "nvidia.com/kai-scheduler-queue"
#: DGD metadata: the Volcano queue of its Grove PodCliqueSet (setting volcano-scheduler)
ANN_VOLCANO_QUEUE: Final = "nvidia.com/volcano-queue"
#: PodCliqueSet metadata: the Volcano queue Grove's Volcano backend schedules it in
ANN_GROVE_VOLCANO_QUEUE: Final = "scheduling.grove.io/volcano-queue"
#: Volcano gang of a LeaderWorkerSet pod before native LWS scaling (#9612); never rendered now
ANN_VOLCANO_GROUP: Final = "scheduling.k8s.io/group-name"
#: kvTransferPolicy (#9879): on worker pods, the node label the operator's topology-label
#: controller copies onto the pod, or the Grove ClusterTopologyBinding whose levels it copies
#: as LABEL_TOPOLOGY_PREFIX + <domain> (#10041)
ANN_TOPOLOGY_LABEL_KEY: Final = "nvidia.com/topology-label-key"
ANN_TOPOLOGY_CLUSTER_TOPOLOGY_NAME: Final = "nvidia.com/topology-cluster-topology-name"
TOPOLOGY_SOURCE_ANNOTATIONS: Final = (ANN_TOPOLOGY_LABEL_KEY, ANN_TOPOLOGY_CLUSTER_TOPOLOGY_NAME)
LABEL_TOPOLOGY_PREFIX: Final = "nvidia.com/dynamo-topology."

#: DGD metadata annotations the operator copies into every component (service value wins).
PROPAGATED_DGD_ANNOTATIONS: Final = (
    ANN_ENABLE_METRICS,
    ANN_DISCOVERY_BACKEND,
    ANN_KUBE_DISCOVERY_MODE,
    ANN_OPERATOR_ORIGIN_VERSION,
    ANN_VLLM_EXECUTOR_BACKEND,
)

#: component annotations the DCD controller leaves off the Deployment, its pod template and
#: the Service it creates (``GetDCDKubeAnnotations``, internal/dynamo/v1beta1_helpers.go @
#: 2a6da14c8): the origin version stays on the DGD and its DCDs
DCD_ONLY_ANNOTATIONS: Final = (ANN_OPERATOR_ORIGIN_VERSION,)

#: values of nvidia.com/workload-provider (``consts.WorkloadProvider*``)
WORKLOAD_PROVIDER_COMPONENT: Final = "component"
WORKLOAD_PROVIDER_GROVE: Final = "grove"
WORKLOAD_PROVIDERS: Final = (WORKLOAD_PROVIDER_COMPONENT, WORKLOAD_PROVIDER_GROVE)
#: nvidia.com/deployment-strategy: Recreate scales old worker generations to zero before the
#: new one starts (#11909); anything else is a rolling update
DEPLOYMENT_STRATEGY_RECREATE: Final = "Recreate"

# --- GitOps tool annotations (theirs, stamped by us) -----------------------------------------
ANN_ARGOCD_SYNC_OPTIONS: Final = "argocd.argoproj.io/sync-options"
ANN_FLUX_PRUNE: Final = "kustomize.toolkit.fluxcd.io/prune"
ARGOCD_PRUNE_FALSE: Final = "Prune=false"
ANN_ARGOCD_COMPARE_OPTIONS: Final = "argocd.argoproj.io/compare-options"
#: an old worker generation, no longer in Git, must not mark the app OutOfSync
ARGOCD_IGNORE_EXTRANEOUS: Final = "IgnoreExtraneous"
FLUX_PRUNE_DISABLED: Final = "disabled"
#: Flux server-side apply policy of one object; ``IfNotPresent``: created when missing, never
#: re-applied (a scaling adapter's ``spec.replicas`` is the autoscaler's once created)
ANN_FLUX_SSA: Final = "kustomize.toolkit.fluxcd.io/ssa"
FLUX_SSA_IF_NOT_PRESENT: Final = "IfNotPresent"

# --- ours ------------------------------------------------------------------------------------
OUR_PREFIX: Final = "dyn-gitops.io/"
ANN_SOURCE_PATH: Final = OUR_PREFIX + "source-path"
ANN_SOURCE_COMMIT: Final = OUR_PREFIX + "source-commit"
ANN_RENDERER_VERSION: Final = OUR_PREFIX + "renderer-version"
ANN_SOURCE_DGD: Final = OUR_PREFIX + "source-dgd"
#: desired replica count of a worker Deployment whose spec.replicas the controller owns
ANN_DESIRED_REPLICAS: Final = OUR_PREFIX + "desired-replicas"
#: replica count Git gives a worker that a Planner scales by patching the DGD (no scaling
#: adapter): the emitted DGD leaves that component's ``replicas`` out and the controller
#: writes this value there once, when it is missing; the Planner owns it from then on
ANN_SEED_REPLICAS: Final = OUR_PREFIX + "seed-replicas"
#: set on worker Deployments so the controller knows it may scale and drain them
ANN_MANAGED_REPLICAS: Final = OUR_PREFIX + "managed-replicas"
#: on an emitted DGD: the worker hash its workers were rendered with. The companion
#: controller prefers it over recomputing the hash (renderer and controller versions may
#: differ); without it the controller recomputes with its own copy of the renderer.
ANN_WORKER_HASH: Final = OUR_PREFIX + "worker-hash"
#: DGD metadata: the worker hash v2 the operator itself records (``worker-hash.md``); we stamp it
#: on the emitted DGD too, so a cluster handed to or from the operator keeps its generation
ANN_CURRENT_WORKER_HASH_V2: Final = "nvidia.com/current-worker-hash-v2"
#: on an emitted DGD rendered on the Grove path: its PodCliqueSet's name (there are no
#: Deployments or worker generations for the controller to manage on that path)
ANN_PODCLIQUESET: Final = OUR_PREFIX + "podcliqueset"
#: on an emitted DGD rendered on the Grove path: the PodCliqueSet's ``spec.updateStrategy.type``
#: as rendered (the DGD's nvidia.com/grove-update-strategy, or ``OnDelete`` chosen by the
#: setting grove-safe-rollout); the controller replaces the pods of an ``OnDelete`` one
ANN_GROVE_RENDERED_STRATEGY: Final = OUR_PREFIX + "grove-update-strategy"
#: on an emitted source DGD converted to v1alpha1: the apiVersion it was written in
ANN_SOURCE_API_VERSION: Final = OUR_PREFIX + "source-api-version"
LABEL_RENDERED_BY: Final = OUR_PREFIX + "rendered-by"
#: repository path of the rendered directory (Argo CD: ARGOCD_APP_SOURCE_PATH); the
#: paths in source-path are relative to it
ANN_SOURCE_ROOT: Final = OUR_PREFIX + "source-root"
#: server-side-apply field manager of the companion controller (Argo CD ignores its fields)
CONTROLLER_FIELD_MANAGER: Final = "dyn-gitops-controller"

#: kubectl's copy of the whole object as last applied (JSON): a Secret's data included
ANN_KUBECTL_LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"

#: on a Flux GitRepository or OCIRepository: the directory of its artifact the companion
#: controller renders into an ExternalArtifact of the same name (docs/flux.md, *In-cluster
#: rendering*); its presence turns the rendering on for that source
ANN_RENDER_PATH: Final = OUR_PREFIX + "render-path"
#: on the same source: namespace of rendered objects that set none (default: the source's)
ANN_RENDER_NAMESPACE: Final = OUR_PREFIX + "render-namespace"
#: in a rendered ExternalArtifact's ``status.artifact.metadata``: the source artifact's digest
#: it was rendered from (the controller renders again only when it changes)
ANN_RENDER_SOURCE_DIGEST: Final = OUR_PREFIX + "source-digest"
