"""Order-sensitive details of the pod spec that golden files would only show indirectly."""

from __future__ import annotations

from pathlib import Path

from support.rendering import render

GRAPH = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: g}
spec:
  pvcs:
  - {name: cc}
  - {name: models}
  services:
    W:
      componentType: worker
      volumeMounts:
      - {name: cc, useAsCompilationCache: true}
      - {name: models, mountPoint: /models}
      extraPodSpec:
        mainContainer:
          image: img:1.1.0
          command: [python3, -m, dynamo.vllm]
          volumeMounts:
          - {name: scratch, mountPath: /scratch}
"""


def test_volume_mounts_keep_the_written_order(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(GRAPH)
    dep = next(o for o in render(tmp_path) if o["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    main = pod["containers"][0]
    # mainContainer mounts, then service mounts as written (cache path filled in), then shm
    assert [(m["name"], m["mountPath"]) for m in main["volumeMounts"]] == [
        ("scratch", "/scratch"),
        ("cc", "/root/.cache/vllm"),
        ("models", "/models"),
        ("shared-memory", "/dev/shm"),
    ]
    # every mount has a volume; missing ones are the PVC of that name
    assert [v["name"] for v in pod["volumes"]] == ["scratch", "cc", "models", "shared-memory"]
    assert pod["volumes"][0] == {
        "name": "scratch",
        "persistentVolumeClaim": {"claimName": "scratch"},
    }
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert env["VLLM_CACHE_ROOT"] == "/root/.cache/vllm"
    assert main["env"][-1]["name"] == "VLLM_CACHE_ROOT"  # backend env is appended last
