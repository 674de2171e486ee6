#!/usr/bin/env python3
"""Parity report: of the objects the real Dynamo operator creates for each upstream example
(``../shared/conformance/operator-output/``, or ``operator-output-grove/`` with ``--grove``),
how many does dyn-gitops render identically?

    python bench/parity_vs_operator.py [--grove] [--shared DIR] [--details N] [--diff NAME]
                                       [--same-hash]

It prints figures and asserts nothing (``tests/test_parity_operator.py`` is the test). The
comparison and its normalizations are ``tests/support/parity.py``: the settings equivalent
to the operator configuration those files were made with, and only the normalizations
their README names.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support.parity import Comparison, Key, Obj, compare, pairs  # noqa: E402


def _worker_hashes(objs: dict[Key, Obj]) -> list[str]:
    labels = ((o.get("metadata") or {}).get("labels") or {} for o in objs.values())
    return sorted({str(v) for lb in labels if (v := lb.get("nvidia.com/dynamo-worker-hash"))})


def same_hash(c: Comparison) -> None:
    """Spell our single worker hash as the operator's, to see the other differences."""
    mine, their = _worker_hashes(c.ours), _worker_hashes(c.theirs)
    if len(mine) != 1 or len(their) != 1:
        return
    a, b = mine[0], their[0]
    c.ours = {
        tuple(x.replace(a, b) for x in k): json.loads(json.dumps(v).replace(a, b))  # type: ignore[misc]
        for k, v in c.ours.items()
    }


def unified(ours: Obj | None, theirs: Obj | None) -> list[str]:
    a = yaml.safe_dump(ours, sort_keys=True).splitlines() if ours is not None else []
    b = yaml.safe_dump(theirs, sort_keys=True).splitlines() if theirs is not None else []
    return list(difflib.unified_diff(a, b, "dyn-gitops", "operator", lineterm="", n=2))


def counts(c: Comparison) -> Counter[str]:
    out: Counter[str] = Counter(operator=len(c.theirs))
    if c.error:
        out.update(error=1, missing=len(c.theirs))
        return out
    for k in set(c.ours) | set(c.theirs):
        if k not in c.theirs:
            out["extra"] += 1
        elif k not in c.ours:
            out["missing"] += 1
        else:
            out["equal" if c.ours[k] == c.theirs[k] else "different"] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--shared", default=str(REPO.parent / "shared"))
    ap.add_argument("--details", type=int, default=0, metavar="N", help="N findings per example")
    ap.add_argument("--diff", metavar="NAME", help="only examples containing NAME, full diffs")
    ap.add_argument("--grove", action="store_true", help="the Grove path (operator-output-grove)")
    ap.add_argument("--same-hash", action="store_true", help="spell our worker hash as theirs")
    args = ap.parse_args()
    output = "operator-output-grove" if args.grove else "operator-output"
    chosen = [
        (e, x) for e, x in pairs(Path(args.shared), output) if not args.diff or args.diff in x.stem
    ]
    total: Counter[str] = Counter()
    print(f"{'example':<72} {'operator':>8} {'equal':>6} {'differ':>6} {'missing':>7} {'extra':>5}")
    for example, expected in chosen:
        c = compare(example, expected)
        if args.same_hash:
            same_hash(c)
        n = counts(c)
        total.update(n)
        flag = f"  (does not render: {c.error})" if c.error else ""
        print(
            f"{c.example:<72.72} {n['operator']:>8} {n['equal']:>6} "
            f"{n['different']:>6} {n['missing']:>7} {n['extra']:>5}{flag}"
        )
        findings = [f"  {label}: {what}" for label, what in c.findings()]
        if args.diff:
            for k in sorted(set(c.ours) | set(c.theirs)):
                if c.ours.get(k) != c.theirs.get(k):
                    print(f"  --- {k[1]}/{k[3]}")
                    print("\n".join(unified(c.ours.get(k), c.theirs.get(k))))
        else:
            print(
                "\n".join(findings[: args.details]), end="\n" if args.details and findings else ""
            )
    share = 100 * total["equal"] / total["operator"] if total["operator"] else 0.0
    print(
        f"\n{len(chosen)} examples; the operator creates {total['operator']} objects; "
        f"dyn-gitops renders {total['equal']} of them identically ({share:.1f} %), "
        f"{total['different']} differently, misses {total['missing']}, adds "
        f"{total['extra']}; {total['error']} examples do not render"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
