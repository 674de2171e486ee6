"""The Kubernetes version whose built-in schemas check rendered objects (kubernetes-validate's
strict schemas in tests/test_schema.py, the same files for kubeconform)."""

K8S_VERSION = "1.34.0"
