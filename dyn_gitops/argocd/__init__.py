"""Argo CD integration: the config-management plugin (CMP) side of dyn-gitops.

``cmpenv`` maps the CMP environment to render settings, ``apicheck`` compares the output
with the destination cluster's APIs, ``plugin`` writes plugin.yaml from the settings
registry, ``generate`` is the one ``generate`` implementation, and ``server`` / ``client``
keep a warm renderer in the sidecar. Nothing here talks to a cluster or the network.
"""
