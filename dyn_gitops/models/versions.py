"""The apiVersions of the Dynamo kinds, importable without building any model (a run
imports the models of a version only when a document of it is present)."""

GROUP = "nvidia.com"
V1ALPHA1 = f"{GROUP}/v1alpha1"
V1BETA1 = f"{GROUP}/v1beta1"
