"""Secret values planted in every env value of DGDs, to prove no output but ``render``'s own
shows one (issue 25, point 4: redaction on structure).

Every planted value is unique and easy to find in any output (``plnt`` + a counter + ``q``).
A value under a credential name (``HF_TOKEN``) is *rotated* between two revisions of a tree;
a value under a plain name (``DYN_LOG``) stays the same, so ``diff`` (which shows plain
configuration that changes, by design) has no reason to show it.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

#: credential env vars added at every level an env list can sit
CREDENTIAL_ENVS = ("HF_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY")
#: a plain-named env added beside them (its value is planted too, and stays put)
PLAIN_ENV = "MODEL_MIRROR"
LEGACY = "DYN_DEPLOYMENT_CONFIG"


@dataclass
class Planter:
    """Makes the planted values; ``rev`` tells the two revisions' credential values apart."""

    rev: str = "a"
    values: set[str] = field(default_factory=set)
    _n: int = 0

    def value(self, *, credential: bool) -> str:
        self._n += 1
        made = f"plnt{self.rev if credential else 'p'}{self._n:04d}q"
        self.values.add(made)
        return made

    def env(
        self, entries: list[Any] | None, *, legacy: bool = False, plain: bool = True
    ) -> list[Any]:
        """``entries`` with every ``value`` planted, and the planted entries added (without
        ``plain``: only credential-named ones)."""
        out = []
        for e in copy.deepcopy(entries or []):
            if isinstance(e, dict) and isinstance(e.get("value"), str):
                e["value"] = self.value(credential=_credential(str(e.get("name"))))
            out.append(e)
        out += [{"name": n, "value": self.value(credential=True)} for n in CREDENTIAL_ENVS]
        if plain:
            out.append({"name": PLAIN_ENV, "value": self.value(credential=False)})
        if legacy:
            out.append({"name": LEGACY, "value": self.legacy_config(plain=plain)})
        return out

    def legacy_config(self, *, plain: bool = True) -> str:
        """A ``DYN_DEPLOYMENT_CONFIG`` holding planted values under credential keys (and,
        with ``plain``, one under a plain key, which stays put)."""
        common = {"hf_token": self.value(credential=True)}
        if plain:
            common["model"] = self.value(credential=False)
        config = {
            "Common": common,
            "Planted": {"ServiceArgs": {"password": self.value(credential=True)}},
        }
        return json.dumps(config)


def _credential(name: str) -> bool:
    from dyn_gitops.display import names_credential

    return names_credential(name)


def plant(doc: Obj, planter: Planter, *, plain: bool = True) -> Obj:
    """A copy of the DGD ``doc`` (either version) with planted env values at every level:
    the graph's envs, each v1alpha1 service's ``envs`` and ``mainContainer.env``, each
    v1beta1 component's pod template containers; ``DYN_DEPLOYMENT_CONFIG`` at graph level.
    Without ``plain``, only credential-named values are added."""
    doc = copy.deepcopy(doc)
    spec = doc.setdefault("spec", {})
    if "components" in spec:
        spec["env"] = planter.env(spec.get("env"), legacy=True, plain=plain)
        for comp in spec["components"]:
            pod = comp.setdefault("podTemplate", {}).setdefault("spec", {})
            for c in pod.setdefault("containers", [{"name": "main"}]):
                c["env"] = planter.env(c.get("env"), plain=plain)
        return doc
    spec["envs"] = planter.env(spec.get("envs"), legacy=True, plain=plain)
    for svc in (spec.get("services") or {}).values():
        svc["envs"] = planter.env(svc.get("envs"), plain=plain)
        main = svc.setdefault("extraPodSpec", {}).setdefault("mainContainer", {})
        main["env"] = planter.env(main.get("env"), plain=plain)
    return doc


def found_in(text: str, values: set[str]) -> list[str]:
    """The planted ``values`` that ``text`` shows (sorted)."""
    return sorted(v for v in values if v in text)
