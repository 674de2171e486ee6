"""DGD expansion: pure functions from validated models to Kubernetes objects. The stage's
entry is :func:`.stage.expand`; one DGD's objects are :func:`.graph.expand_graph`'s."""
