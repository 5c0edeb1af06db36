"""Write fmcluster/platforms/hyperpod/instance_types.json: the ml. instance types SageMaker HyperPod offers, from the
installed botocore's SageMaker model (its ClusterInstanceType enum). Run after a botocore update in requirements.lock;
tests/platforms/hyperpod/test_instance_types.py fails while the file and botocore disagree.

    python scripts/hyperpod_instance_types.py [--check]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict

TARGET = Path(__file__).resolve().parent.parent / "fmcluster" / "platforms" / "hyperpod" / "instance_types.json"


def from_botocore() -> Dict[str, Any]:
    import botocore
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return {"source": f"botocore {botocore.__version__}, SageMaker API model, shape ClusterInstanceType",
            "types": sorted(model.shape_for("ClusterInstanceType").enum)}


def main(argv: list) -> int:
    data = from_botocore()
    text = json.dumps(data, indent=1) + "\n"
    if "--check" in argv:
        current = json.loads(TARGET.read_text()) if TARGET.exists() else {}
        return 0 if current.get("types") == data["types"] else 1
    TARGET.write_text(text)
    print(f"wrote {len(data['types'])} types to {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
