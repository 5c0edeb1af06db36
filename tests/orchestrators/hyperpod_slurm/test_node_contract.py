"""The node contract of SageMaker HyperPod with Slurm: what the spec accepts, the node accepts — and the other way round.

Before runtime/contract.py, the spec accepted `sk-...` SSH keys and refused `ssh-dss` while the node did the
opposite, and uids 1000-1999 passed on the node only: a spec could validate, deploy, then fail at boot.
"""

from __future__ import annotations

import copy

import pytest
from helpers.storage import fsx_mounts

from fmcluster.orchestrators.hyperpod_slurm.construct import lifecycle_parameters
from fmcluster.platforms.storage.fsx_lustre.node import lifecycle as fsx_entry
from fmcluster.registry import parse_spec
from fmcluster.runtime import contract, stores
from fmcluster.runtime.node_setup import parameters
from fmcluster.runtime.node_setup.files import SetupError
from fmcluster.spec import SpecError

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHNhbXBsZWtleXNhbXBsZWtleXNhbXBsZWtleXNhbXBs alice@laptop"
BODY = "AAAAB3NzaC1yc2EAAAADAQABAAABAQC7"
BASE = {
    "name": "contract",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 1}],
    "orchestrator": {"type": "hyperpod-slurm", "hyperpod": {}},
}


def spec_accepts(user: dict) -> bool:
    data = copy.deepcopy(BASE)
    data["orchestrator"]["hyperpod"]["users"] = [user]
    try:
        parse_spec(data)
        return True
    except SpecError:
        return False


def node_accepts(user: dict) -> bool:
    try:
        parameters.users_of({"users": [user]})
        return True
    except SetupError:
        return False


@pytest.mark.parametrize(
    "key",
    [
        ED25519,
        f"ssh-rsa {BODY}",
        f"ecdsa-sha2-nistp256 {BODY} ops",
        f"sk-ssh-ed25519@openssh.com {BODY} yubikey",
        f"sk-ecdsa-sha2-nistp256@openssh.com {BODY}",
        f"ssh-dss {BODY}",  # OpenSSH removed DSA in 9.8: refused on both sides
        f"sk-anything {BODY}",  # the spec took any sk-* before
        "ssh-ed25519",  # no key body
        f"ssh-ed25519 {BODY}\nssh-rsa {BODY}",  # two lines smuggled into one entry
    ],
)
def test_an_ssh_key_is_accepted_by_the_spec_exactly_when_the_node_accepts_it(key):
    user = {"name": "alice", "uid": 2001, "ssh_public_keys": [key]}
    assert spec_accepts(user) == node_accepts(user) == contract.ssh_key_ok(key)


@pytest.mark.parametrize("uid", [999, 1000, 1999, 2000, 60000, 60001])
def test_uid_bounds_are_the_same_on_both_sides(uid):
    user = {"name": "alice", "uid": uid}
    assert spec_accepts(user) == node_accepts(user) == (contract.UID_MIN <= uid <= contract.UID_MAX)


@pytest.mark.parametrize("group", ["docker", "ml_team", "Docker", "wheel!", "a b"])
def test_group_names_are_the_same_on_both_sides(group):
    user = {"name": "alice", "uid": 2001, "groups": [group]}
    assert spec_accepts(user) == node_accepts(user)


def test_lifecycle_parameters_the_synth_side_renders_pass_the_node_side_and_match_the_schema():
    data = copy.deepcopy(BASE)
    data["orchestrator"]["hyperpod"]["users"] = [{"name": "alice", "uid": 2001, "groups": ["docker"],
                                                  "ssh_public_keys": [ED25519]}]
    spec = parse_spec(data)
    mounts = fsx_mounts(efa=True)  # EFA-enabled: the lifecycle scripts mount it
    params = lifecycle_parameters(spec, "us-east-1", mounts, "https://aps-workspaces.example/api/v1/remote_write")
    assert tuple(params) == contract.with_store_entries(contract.LIFECYCLE_PARAMETERS_KEYS, stores.lifecycle_keys())
    assert params["version"] == contract.LIFECYCLE_PARAMETERS_VERSION
    assert all(tuple(w) == contract.WORKER_GROUP_KEYS for w in params["worker_groups"])
    assert tuple(params["fsx"]) == fsx_entry.ENTRY_KEYS
    assert all(tuple(u) == contract.USER_KEYS for u in params["users"])
    parameters.validate_params(params)  # raises on any disagreement


def test_the_ml_prefix_rule_is_one_function_pair():
    assert contract.ml_type("p5.48xlarge") == contract.ml_type("ml.p5.48xlarge") == "ml.p5.48xlarge"
    assert contract.ec2_type("ml.p5.48xlarge") == contract.ec2_type("p5.48xlarge") == "p5.48xlarge"
    assert parse_spec({**BASE, "node_groups": [{"name": "gpu", "instance_type": "ml.p5.48xlarge", "count": 1}]}
                      ).node_groups[0].instance_type == "p5.48xlarge"
