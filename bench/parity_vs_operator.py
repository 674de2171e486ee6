#!/usr/bin/env python3
"""Parity report: of the objects the real Dynamo operator creates for each upstream example
(``../shared/conformance/operator-output/``), how many does dyn-gitops render identically?

    python bench/parity_vs_operator.py [--shared DIR] [--details N] [--diff NAME] [--same-hash]

It prints figures and asserts nothing: the parity test of issue 13 is the test. Each example
is rendered in-process with the settings equivalent to the operator configuration those files
were made with (their README), and both sides are normalized only as that README says: the
operator's ``nvidia.com/last-applied-*`` bookkeeping and our ``dyn-gitops.io/`` annotations,
the input's non-DGD objects (cluster state there, passed through here), the ``OracleReport``
document, and Go's encoding of an unset LeaderWorkerSet ``rolloutStrategy``.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dyn_gitops import context  # noqa: E402
from dyn_gitops.errors import DynGitopsError  # noqa: E402

Obj = dict[str, Any]
Key = tuple[str, str, str, str]  # group, kind, namespace, name

#: the operator-output README's operator configuration, as dyn-gitops settings
SETTINGS = {
    "managed-replicas": False,
    "emit-source": False,
    "discovery-backend": "kubernetes",
    "lws": True,
    "dra": True,
    "grove": False,
    "operator-release": "dynamo-platform",
    "mpi-ssh-secret": "mpi-run-ssh-secret",
    "planner-rbac": True,
    "namespace": "default",
    # the oracle ran the 2a6da14c8 reconcilers without the 1.5 runtime-version admission
    # (examples use ${VERSION} and my-tag) and without the origin-version stamp (README)
    "runtime-version-admission": "lenient",
    "origin-version": "none",
}
BOOKKEEPING = ("nvidia.com/last-applied-", "dyn-gitops.io/")


def key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return group, str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))


def normalized(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    meta = out.get("metadata") or {}
    ann = {
        k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith(BOOKKEEPING)
    }
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    if out.get("kind") == "LeaderWorkerSet" and (out.get("spec") or {}).get("rolloutStrategy") == {
        "type": ""
    }:
        del out["spec"]["rolloutStrategy"]
    return out


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Field paths where ``a`` (ours) and ``b`` (the operator's) differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for k in sorted(set(a) | set(b), key=str)
            for d in differences(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [path or "."]


def _worker_hashes(objs: dict[Key, Obj]) -> list[str]:
    labels = ((o.get("metadata") or {}).get("labels") or {} for o in objs.values())
    return sorted({str(v) for lb in labels if (v := lb.get("nvidia.com/dynamo-worker-hash"))})


def same_hash(ours: dict[Key, Obj], theirs: dict[Key, Obj]) -> dict[Key, Obj]:
    """``ours`` with our single worker hash spelt as the operator's, to see other differences."""
    mine, their = _worker_hashes(ours), _worker_hashes(theirs)
    if len(mine) != 1 or len(their) != 1:
        return ours
    a, b = mine[0], their[0]
    return {
        tuple(x.replace(a, b) for x in k): json.loads(json.dumps(v).replace(a, b))  # type: ignore[misc]
        for k, v in ours.items()
    }


def unified(ours: Obj | None, theirs: Obj | None) -> list[str]:
    a = yaml.safe_dump(ours, sort_keys=True).splitlines() if ours is not None else []
    b = yaml.safe_dump(theirs, sort_keys=True).splitlines() if theirs is not None else []
    return list(difflib.unified_diff(a, b, "dyn-gitops", "operator", lineterm="", n=2))


def compare(
    example: Path, expected: Path, hash_blind: bool = False, full_diff: bool = False
) -> tuple[Counter[str], list[str]]:
    """Counts (operator, equal, different, missing, extra, error) and detail lines."""
    counts: Counter[str] = Counter()
    theirs = {
        key(o): normalized(o)
        for o in yaml.safe_load_all(expected.read_text())
        if isinstance(o, dict) and o.get("kind") != "OracleReport"
    }
    counts["operator"] = len(theirs)
    inputs = [o for o in yaml.safe_load_all(example.read_text()) if isinstance(o, dict)]
    cluster_state = {
        key({**o, "metadata": {"namespace": "default", **(o.get("metadata") or {})}})
        for o in inputs
        if o.get("kind") != "DynamoGraphDeployment"
    }
    try:
        ctx = context.open_path(str(example), runner=context.Runner(flags=SETTINGS))
        rendered = context.render(ctx).objects
    except DynGitopsError as exc:
        counts["error"] = 1
        counts["missing"] = len(theirs)
        return counts, [f"  does not render: {str(exc).splitlines()[0]}"]
    ours = {key(o): normalized(o) for o in rendered if key(o) not in cluster_state}
    if hash_blind:
        ours = same_hash(ours, theirs)
    details: list[str] = []
    for k in sorted(set(ours) | set(theirs)):
        label = f"{k[1]}/{k[3]}"
        if k not in theirs:
            counts["extra"] += 1
            details.append(f"  extra    {label}")
        elif k not in ours:
            counts["missing"] += 1
            details.append(f"  missing  {label}")
        elif ours[k] == theirs[k]:
            counts["equal"] += 1
        else:
            counts["different"] += 1
            diff = differences(ours[k], theirs[k])
            shown = ", ".join(diff[:4]) + (f" (+{len(diff) - 4})" if len(diff) > 4 else "")
            details.append(f"  differs  {label}: {shown}")
        if full_diff and ours.get(k) != theirs.get(k):
            details.extend(unified(ours.get(k), theirs.get(k)))
    return counts, details


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", default=str(REPO.parent / "shared"))
    ap.add_argument(
        "--details",
        type=int,
        default=0,
        metavar="N",
        help="print up to N lines of differences per example",
    )
    ap.add_argument("--diff", metavar="NAME", help="only examples containing NAME, full diffs")
    ap.add_argument(
        "--same-hash",
        action="store_true",
        help="spell our worker hash as the operator's (to see the other differences)",
    )
    args = ap.parse_args()
    conformance = Path(args.shared) / "conformance"
    outputs = sorted(p for p in (conformance / "operator-output").glob("*.yaml"))
    if args.diff:
        outputs = [p for p in outputs if args.diff in p.stem]
    total: Counter[str] = Counter()
    print(f"{'example':<72} {'operator':>8} {'equal':>6} {'differ':>6} {'missing':>7} {'extra':>5}")
    for expected in outputs:
        counts, details = compare(
            conformance / "dynamo-examples" / expected.name,
            expected,
            hash_blind=args.same_hash,
            full_diff=bool(args.diff),
        )
        total.update(counts)
        flag = "  (does not render)" if counts["error"] else ""
        print(
            f"{expected.stem:<72.72} {counts['operator']:>8} {counts['equal']:>6} "
            f"{counts['different']:>6} {counts['missing']:>7} {counts['extra']:>5}{flag}"
        )
        for line in details if args.diff else details[: args.details]:
            print(line)
    share = 100 * total["equal"] / total["operator"] if total["operator"] else 0.0
    print(
        f"\n{len(outputs)} examples; the operator creates {total['operator']} objects; "
        f"dyn-gitops renders {total['equal']} of them identically ({share:.1f} %), "
        f"{total['different']} differently, misses {total['missing']}, adds "
        f"{total['extra']}; {total['error']} examples do not render"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
