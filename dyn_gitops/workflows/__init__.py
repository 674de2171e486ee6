"""Workflows over the render pipeline: hydrate (Flux), diff (review), KRM function and
Helm post-renderer (Kustomize / Helm users).

Each one is a thin adapter: the render itself is always :func:`dyn_gitops.pipeline.render`.
Only :mod:`.gitstore` imports pygit2, and nothing here talks to a cluster.
"""
