"""Refresh the KubeRay CRD schemas the tests validate RayJobs against (tests/platforms/kubernetes/crds/): the storage
version's openAPIV3Schema of RayJob and RayCluster from the chart's crds/ at a release tag, with each embedded pod
template (head, worker groups, submitter) replaced by {"type": "object", "x-fmcluster-pod-template": true}: the tests
validate those against Kubernetes' own PodTemplateSpec (kubernetes-validate), which keeps the files at 35 KB rather
than 1.4 MB.

    python scripts/kuberay_schemas.py --git-dir PATH/TO/kuberay.git --tag v1.7.0
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).resolve().parent.parent / "tests" / "platforms" / "kubernetes" / "crds"
CRDS = {"RayJob": "ray.io_rayjobs.yaml", "RayCluster": "ray.io_rayclusters.yaml"}
MARK = "x-fmcluster-pod-template"


def prune(node: Any) -> Any:
    if isinstance(node, dict):
        props = node.get("properties", {})
        spec = props.get("spec", {}) if isinstance(props, dict) else {}
        if node.get("type") == "object" and "metadata" in props and "containers" in spec.get("properties", {}):
            return {"type": "object", MARK: True}
        return {k: prune(v) for k, v in node.items()}
    if isinstance(node, list):
        return [prune(v) for v in node]
    return node


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True)
    parser.add_argument("--tag", required=True)
    args = parser.parse_args()
    for kind, name in CRDS.items():
        path = f"helm-chart/kuberay-operator/crds/{name}"
        text = subprocess.run(["git", "--git-dir", args.git_dir, "show", f"{args.tag}:{path}"], check=True,
                              capture_output=True, text=True, timeout=60).stdout
        crd = yaml.safe_load(text)
        version = next(v for v in crd["spec"]["versions"] if v.get("storage"))
        data = {"group": crd["spec"]["group"], "version": version["name"], "kind": kind, "scope": crd["spec"]["scope"],
                "source": f"https://github.com/ray-project/kuberay/blob/{args.tag}/{path}",
                "openAPIV3Schema": prune(version["schema"]["openAPIV3Schema"])}
        out = OUT / f"kuberay-{args.tag}-{kind.lower()}-{version['name']}.json"
        out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
