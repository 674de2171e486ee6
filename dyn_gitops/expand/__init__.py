"""DGD expansion: pure functions from validated models to Kubernetes objects."""
