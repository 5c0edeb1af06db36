"""What the hyperpod-slurm kind puts in its lifecycle parameters, a store the nodes mount from its boot form
included, is what the node side accepts (runtime/node_setup/parameters.py)."""

from __future__ import annotations

from helpers.storage import fsx_mounts, with_boot_only_store

from fmcluster.orchestrators.hyperpod_slurm.construct import lifecycle_parameters
from fmcluster.platforms.hyperpod.mounts import IMAGES
from fmcluster.registry import parse_spec
from fmcluster.runtime import contract, stores
from fmcluster.runtime.node_setup import parameters

SPEC = {"name": "hp", "region": "us-east-1", "availability_zone": "us-east-1a",
        "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 1}],
        "orchestrator": {"type": "hyperpod-slurm", "hyperpod": {}}}


def test_what_the_kind_renders_the_node_accepts():
    rendered = lifecycle_parameters(parse_spec(SPEC), "us-east-1", with_boot_only_store(fsx_mounts(), IMAGES), None)
    assert tuple(rendered) == contract.with_store_entries(contract.LIFECYCLE_PARAMETERS_KEYS, stores.lifecycle_keys())
    assert all(tuple(m) == contract.MOUNT_KEYS for m in rendered["mounts"])
    assert parameters.validate_params(rendered)["mounts"] == rendered["mounts"]
