"""The operator's worker hash v2, byte-identical: a DGD in its v1beta1 hub form (:mod:`.hub`),
the worker DCDs the operator would generate (:mod:`.compute`), encoded as Go's
``encoding/json`` encodes them (:mod:`.gojson`)."""
