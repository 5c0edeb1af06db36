"""The HyperPod instance types fmcluster accepts are the SageMaker API's, as the pinned botocore ships them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fmcluster.platforms.hyperpod.settings import INSTANCE_TYPES, hyperpod_instance_types, offered_problem

ROOT = Path(__file__).resolve().parents[3]


def test_the_committed_list_is_the_pinned_botocores_cluster_instance_types():
    import botocore.session

    enum = botocore.session.get_session().get_service_model("sagemaker").shape_for("ClusterInstanceType").enum
    assert hyperpod_instance_types() == frozenset(enum), \
        "botocore's SageMaker model changed: run `python scripts/hyperpod_instance_types.py` and commit the file"
    assert json.loads(INSTANCE_TYPES.read_text())["source"].startswith("botocore ")


def test_validating_a_hyperpod_spec_loads_no_botocore():
    """The list is read from the package, so validate and plan of a HyperPod spec skip botocore's import."""
    code = ("import sys; from fmcluster.registry import load_spec; "
            f"load_spec({str(ROOT / 'examples' / 'hyperpod-slurm-p5.yaml')!r}); print('botocore' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def test_a_type_hyperpod_does_not_offer_names_the_sizes_it_does():
    problem = offered_problem("p5.2xlarge")
    assert problem is not None and "ml.p5.48xlarge" in problem
    assert offered_problem("p5.48xlarge") is None
