"""dyn-gitops: render NVIDIA Dynamo graphs for GitOps (render side, pure)."""

# The single source of the version: pyproject.toml reads it (a metadata lookup at
# start-up would cost ~30 ms on every Argo CD refresh).
__version__ = "0.1.0"
