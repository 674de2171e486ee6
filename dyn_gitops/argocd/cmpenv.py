"""The environment Argo CD gives a plugin command, mapped to render settings.

Precedence, lowest first (the registry's rule in Argo CD's spellings):

1. the registry default; for ``namespace`` the Application's destination namespace
   (``ARGOCD_APP_NAMESPACE``) when it has one;
2. ``dyn-gitops.yaml`` at the application root;
3. the sidecar's own environment, ``DYN_GITOPS_<NAME>`` (as for the CLI: an unknown name
   is an error, except the reserved operational ones such as ``DYN_GITOPS_DEBUG``);
4. the Application's ``spec.source.plugin.env`` entry ``DYN_GITOPS_<NAME>``, which Argo CD
   passes as ``ARGOCD_ENV_DYN_GITOPS_<NAME>``;
5. the Application's ``spec.source.plugin.parameters`` (``ARGOCD_APP_PARAMETERS``).

Argo CD does not send announced defaults, so the defaults above apply whatever the UI shows.

Trust: 3 is the sidecar's own configuration (whoever runs the plugin); 2, 4 and 5 come from
the repository or the Application, so they may only lower a limit (settings group
``limits``) below what 1 and 3 set; :data:`dyn_gitops.settings.RUNNER_SOURCES` says which.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..display import describe
from ..errors import UsageError
from ..parse import json_loads_bounded
from ..settings import ARGOCD_ENV_PREFIX, BY_NAME, ENV_PREFIX

#: what the plugin reads from ``spec.source.plugin.env`` (Argo CD adds ARGOCD_ENV_)
APP_ENV_PREFIX = ARGOCD_ENV_PREFIX + ENV_PREFIX
#: environment variables of settings, in the order resolve() applies them (later wins)
ENV_PREFIXES = (ENV_PREFIX, APP_ENV_PREFIX)
#: a list of objects whose values are strings (or, refused, arrays and maps of strings);
#: read before any setting is known, so the bound is fixed
PARAMETERS_MAX_DEPTH = 8


class CmpEnvError(UsageError):
    """The CMP environment cannot be used; carries every problem found."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems), problems)


@dataclass(frozen=True)
class CmpInputs:
    """What ``generate`` takes from the environment besides the files."""

    settings_env: dict[str, str]  # only the variables resolve() must read
    parameters: dict[str, str]  # setting name -> raw value
    namespace: str  # destination namespace, "" when the Application has none
    revision: str  # resolved commit, "" outside Argo CD
    source_path: str  # repository path of the application directory, "" when unknown
    kube_version: str
    kube_api_versions: str


def _setting_name(suffix: str) -> str:
    return suffix.lower().replace("_", "-")


def read(environ: Mapping[str, str]) -> CmpInputs:
    """Collect the CMP inputs; raise :class:`CmpEnvError` with every problem."""
    problems: list[str] = []
    settings_env: dict[str, str] = {}
    for var, value in environ.items():
        if var.startswith((APP_ENV_PREFIX, ENV_PREFIX)):
            settings_env[var] = value  # unknown names are reported by resolve()
        elif var.startswith(ARGOCD_ENV_PREFIX):
            rest = var[len(ARGOCD_ENV_PREFIX) :]
            if _setting_name(rest) in BY_NAME:
                problems.append(
                    f"environment {var}: not read: name the plugin env entry "
                    f"{ENV_PREFIX}{rest} (Argo CD passes it as {APP_ENV_PREFIX}{rest})"
                )
    parameters = parse_parameters(environ.get("ARGOCD_APP_PARAMETERS", ""), problems)
    namespace = environ.get("ARGOCD_APP_NAMESPACE", "").strip()
    if namespace:  # the same rule as the namespace setting, whatever its source
        try:
            BY_NAME["namespace"].parse(namespace)
        except ValueError as exc:
            problems.append(f"environment ARGOCD_APP_NAMESPACE: namespace: {exc}")
    if problems:
        raise CmpEnvError(problems)
    raw_path = environ.get("ARGOCD_APP_SOURCE_PATH", "").strip()
    return CmpInputs(
        settings_env=settings_env,
        parameters=parameters,
        namespace=namespace,
        revision=environ.get("ARGOCD_APP_REVISION", "").strip(),
        source_path=posixpath.normpath(raw_path) if raw_path else "",
        kube_version=environ.get("KUBE_VERSION", "").strip(),
        kube_api_versions=environ.get("KUBE_API_VERSIONS", ""),
    )


def parse_parameters(raw: str, problems: list[str]) -> dict[str, str]:
    """``ARGOCD_APP_PARAMETERS`` (a JSON list of ``{name, string|array|map}``) -> name: value.

    Every setting takes one value, so arrays and maps are refused. A parameter without a
    value is not set. Unknown names are left to the settings resolver (it suggests names).
    """
    where = "ARGOCD_APP_PARAMETERS"
    if not raw.strip() or raw.strip() == "null":  # Argo CD sends "null" for no parameters
        return {}
    try:
        data: Any = json_loads_bounded(raw, max_depth=PARAMETERS_MAX_DEPTH)
    except ValueError as exc:
        problems.append(f"{where}: not valid JSON ({exc})")
        return {}
    if not isinstance(data, list):
        problems.append(f"{where}: expected a JSON list of parameters, found {type(data).__name__}")
        return {}
    out: dict[str, str] = {}
    seen: set[str] = set()
    for i, item in enumerate(data):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            problems.append(
                f"{where}[{i}]: expected an object with a name, found "
                f"{describe(item, sensitive=True)}"
            )
            continue
        assert isinstance(item, dict)
        if name in seen:
            problems.append(f"parameter {name}: given twice")
            continue
        seen.add(name)
        for shape in ("array", "map"):
            if item.get(shape) is not None:
                problems.append(
                    f"parameter {name}: takes a single value (string), "
                    f"found {'an' if shape == 'array' else 'a'} {shape}"
                )
                break
        else:
            value = item.get("string")
            if value is None:
                continue
            if not isinstance(value, str):
                problems.append(
                    f"parameter {name}: expected a string, found {describe(value, sensitive=True)}"
                )
                continue
            out[name] = value
    return out
