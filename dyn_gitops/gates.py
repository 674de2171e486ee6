"""The operator's version gates: rendered defaults chosen by the runtime version of a
component's image, and behaviour chosen by the operator version that created the DGD.

Runtime gates (``internal/features/runtime/gates.go``, #12421, #11083, #13512, #11355): a
component whose runtime version does not resolve (a custom tag, ``latest``, a digest, no
image) gets the legacy profile, every gate off, as a DGD created before 1.5 does. Their
minimums are 1.5.0, the first runtime version hashed into the worker generation, so an
operator-only upgrade never changes a running worker (``deploy/operator/AGENTS.md``, #13244).
At 2a6da14c8 ``CanaryHealthChecks`` was declared at 1.4.0 but not read yet (the worker env
was hard-coded ``false``); the release wires it at 1.5.0 with the liveness gate of #13512.

Origin gates (``internal/features/compatibility``): read from the annotation
``nvidia.com/dynamo-operator-origin-version`` that the 1.5 defaulting webhook stamps on
create; no annotation means a DGD older than the stamp, every gate off. The stamp also
says whether a DGD predates the 1.5 runtime-version admission (:func:`predates`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from . import keys
from .runtimeversion import OriginVersion, Version, parse_origin


@dataclass(frozen=True)
class RuntimeGate:
    """A rendered default adopted from a Dynamo runtime version on (``runtime.Gate``)."""

    name: str
    min_runtime: Version

    def enabled(self, runtime: Version | None) -> bool:
        """On for a known runtime at or above the minimum; off for an unresolved one."""
        return runtime is not None and runtime >= self.min_runtime


#: workers get DYN_HEALTH_CHECK_ENABLED=true (#11083)
CANARY_HEALTH_CHECKS: Final = RuntimeGate("CanaryHealthChecks", Version(1, 5, 0))
#: worker liveness failureThreshold 3 instead of 1 (#13512, cherry-picked as #14490)
INCREASED_WORKER_FAILURE_THRESHOLD: Final = RuntimeGate(
    "IncreasedWorkerFailureThreshold", Version(1, 5, 0)
)
#: the EPP is the native Rust one (no eppConfig; a legacy Go EPP image needs it) (#11355)
NATIVE_RUST_EPP: Final = RuntimeGate("NativeRustEPP", Version(1, 5, 0))
#: the first runtime version hashed into the worker generation (``hash.go``
#: ``minimumHashedRuntimeVersion``, #12633); no runtime gate may start below it
MIN_HASHED_RUNTIME: Final = Version(1, 5, 0)

RUNTIME_GATES: Final = (
    CANARY_HEALTH_CHECKS,
    INCREASED_WORKER_FAILURE_THRESHOLD,
    NATIVE_RUST_EPP,
)


@dataclass(frozen=True)
class OriginGate:
    """Behaviour a DGD gets when created by an operator at or above a version
    (``compatibility.Gate``)."""

    name: str
    min_origin: Version

    def enabled(self, annotations: dict[str, str] | None) -> bool:
        """Off without the origin annotation or with one that is not a version."""
        value = (annotations or {}).get(keys.ANN_OPERATOR_ORIGIN_VERSION)
        origin: OriginVersion | None = None if value is None else parse_origin(value)
        return origin is not None and origin.at_least(self.min_origin)


#: vLLM multinode launches with multiprocessing, not Ray (``compatibility/gates.go``)
VLLM_MULTIPROCESSING: Final = OriginGate("VLLMMultiprocessing", Version(1, 0, 0))


#: the first operator version whose webhook admits a component by its runtime version (#10494)
RUNTIME_VERSION_ADMISSION: Final = Version(1, 5, 0)


def predates(annotations: dict[str, str] | None, version: Version) -> bool:
    """Whether the origin annotation says the object was created by an operator older than
    ``version``: False without the annotation or with one that is not a version (the
    rules refuse it), so only a stamp written on purpose opts into older behaviour."""
    value = (annotations or {}).get(keys.ANN_OPERATOR_ORIGIN_VERSION)
    origin = None if value is None else parse_origin(value)
    return origin is not None and not origin.at_least(version)
