"""dyn-gitops: render NVIDIA Dynamo graphs for GitOps (render side, pure)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dyn-gitops")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"
