"""Mountpoint for Amazon S3 on ParallelCluster, whose SharedStorage has no S3 type: the spec takes the section, the
nodes run the store's boot lines from ``mounts.sh``, the first script of every OnNodeConfigured (and of the head
node's OnNodeUpdated), the head and compute policies carry exactly the store's permissions, the configuration passes
ParallelCluster's own schema, and a cluster without such a store keeps its single-script actions."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest
import yaml
from helpers import actions_of, resources_of
from helpers.parallelcluster import ROOT, configuration, pcluster_update_check, pcluster_validate, with_placeholders

from fmcluster import registry
from fmcluster.orchestrators.parallelcluster.mounts import BUDGET_S, mounts_script
from fmcluster.orchestrators.parallelcluster.settings import cluster_name
from fmcluster.platforms.storage.forms import BootMount, Mount

EXAMPLE = "parallelcluster-p5"
SECTION = {"prefix": "checkpoints/", "mount_point": "/checkpoints", "read_only": False, "allow_delete": True}


def spec_data() -> Dict[str, Any]:
    data = yaml.safe_load((ROOT / "examples" / f"{EXAMPLE}.yaml").read_text())
    data["storage"]["mountpoint_s3"] = dict(SECTION)
    return data


@pytest.fixture(scope="module")
def built():
    """The example with the section, synthesized once for this module: (stacks, cluster template)."""
    from aws_cdk.assertions import Template

    from fmcluster.app import build_stacks

    stacks = build_stacks(registry.parse_spec(spec_data()))
    return stacks, Template.from_stack(stacks.cluster).to_json()


def policy_of(template: Dict[str, Any], prefix: str) -> List[Dict[str, Any]]:
    (found,) = [v for k, v in resources_of(template, "AWS::IAM::ManagedPolicy").items() if k.startswith(prefix)]
    return found["Properties"]["PolicyDocument"]["Statement"]


def script_key(script: Any) -> str:
    """The object key of an s3:// script URL (Fn::Join ["", ["s3://", bucket, "/fmcluster/<key>"]])."""
    return script["Fn::Join"][1][-1].rsplit("/fmcluster/", 1)[1]


def test_the_spec_accepts_the_section_under_parallelcluster():
    spec = registry.parse_spec(spec_data())
    assert spec.storage.mountpoint_s3.mount_point == "/checkpoints"
    (kind,) = [k for k in registry.kinds() if k.name == "parallelcluster"]
    assert frozenset({"boot"}) in kind.storage.mount_forms


def test_every_node_runs_the_mounts_script_before_fmclusters_action(built):
    _, template = built
    config = configuration(template)
    head = config["HeadNode"]["CustomActions"]
    actions = [head["OnNodeConfigured"], head["OnNodeUpdated"]]
    actions += [q["CustomActions"]["OnNodeConfigured"] for q in config["Scheduling"]["SlurmQueues"]]
    assert len(actions) == 2 + len(config["Scheduling"]["SlurmQueues"])
    for action in actions:
        first, second = action["Sequence"]
        assert first == {"Script": first["Script"]} and script_key(first["Script"]) == "mounts.sh"
        assert script_key(second["Script"]) == "on_node_configured.sh" and "--role" in second["Args"]


def test_the_mounts_script_runs_the_stores_boot_lines_for_the_clusters_os(built):
    stacks, _ = built
    orchestration = stacks.cluster.orchestration.construct
    (mount,) = [m for m in stacks.cluster.context.mounts if m.store == "mountpoint-s3"]
    # the client's install on Ubuntu 22.04 (the example's os), then the fstab line and the mount (tokens as strings)
    assert mount.boot.shell(image="ubuntu2204") in orchestration.assets.mounts
    text = json.dumps(stacks.cluster.resolve(orchestration.assets.mounts))
    assert "/mount-s3-" in text and "apt-get install -y -q ./p.deb" in text and "dnf " not in text
    assert " /checkpoints mount-s3 _netdev,nosuid,nodev,nofail,rw,allow-other,region=us-east-1,allow-delete 0 0" in text
    assert orchestration.assets.mounts.endswith("\nexit 0\n")
    # FSx stays ParallelCluster's own SharedStorage entry, not in the script
    assert "lustre" not in text


def test_the_compute_groups_profiles_expect_the_mount(built):
    stacks, _ = built
    orchestration = stacks.cluster.orchestration.construct
    for group, profile in orchestration.assets.profiles.items():
        paths = [m["path"] for m in json.loads(profile)["mounts"]]
        assert "/checkpoints" in paths, group


def test_head_and_compute_policies_carry_exactly_the_stores_permissions(built):
    stacks, template = built
    (mount,) = [m for m in stacks.cluster.context.mounts if m.store == "mountpoint-s3"]
    expected = {p.sid: sorted(p.actions) for p in mount.node_permissions}
    assert set(expected) == {"MountpointS3List", "MountpointS3Objects", "MountpointS3Key"}
    assert expected["MountpointS3Objects"] == ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject",
                                               "s3:PutObject"]
    for prefix in ("ParallelClusterComputePolicy", "ParallelClusterHeadNodePolicy"):
        statements = policy_of(template, prefix)
        found = {s["Sid"]: sorted(actions_of(s)) for s in statements if s.get("Sid", "").startswith("Mountpoint")}
        assert found == expected, prefix
        assert not [a for s in statements for a in actions_of(s) if "*" in a], prefix
        objects = next(s for s in statements if s.get("Sid") == "MountpointS3Objects")
        assert json.dumps(objects["Resource"]).endswith('"/checkpoints/*"]]}'), prefix
        listing = next(s for s in statements if s.get("Sid") == "MountpointS3List")
        assert listing["Condition"] == {"StringLike": {"s3:prefix": ["checkpoints/*"]}}, prefix
        reads = [s for s in statements if actions_of(s) == ["s3:GetObject"] and "Sid" not in s]
        assert any("/fmcluster/mounts.sh" in json.dumps(s["Resource"]) for s in reads), prefix


def test_the_configuration_passes_parallelclusters_own_schema(built, pcluster_python, tmp_path):
    _, template = built
    spec = registry.parse_spec(spec_data())
    code, report = pcluster_validate(pcluster_python, with_placeholders(configuration(template)), cluster_name(spec),
                                     tmp_path)
    assert code == 0 and report["valid"], report["errors"]
    assert [f for f in report["findings"] if f["level"] != "INFO"] == [], report["findings"]


def test_the_gate_refuses_a_sequence_beside_a_script(built, pcluster_python, tmp_path):
    """The gate reads Sequence: both forms at once is ParallelCluster's own error."""
    _, template = built
    config = with_placeholders(configuration(template))
    action = config["Scheduling"]["SlurmQueues"][0]["CustomActions"]["OnNodeConfigured"]
    action["Script"] = action["Sequence"][1]["Script"]
    code, report = pcluster_validate(pcluster_python, config, "pc-p5", tmp_path)
    assert code == 1 and not report["valid"]
    assert "Both Script and Sequence" in json.dumps(report["errors"])


def test_clusters_without_such_a_store_keep_one_script_and_no_mounts_object():
    """The committed templates of the ParallelCluster examples (held to a fresh synth by tests/test_quality.py): the
    one without the store keeps single-script actions; the one with it (on Amazon Linux 2023) runs mounts.sh first."""
    mounted = {}
    for example in ("parallelcluster-p5", "parallelcluster-p5en-capacity-block"):
        (path,) = (ROOT / "templates" / example).glob("*-cluster.template.json")
        text = path.read_text()
        has = registry.load_spec(ROOT / "examples" / f"{example}.yaml").storage.mountpoint_s3 is not None
        assert ("mounts.sh" in text) == ('"Sequence"' in text) == has, example
        mounted[example] = has
    assert mounted == {"parallelcluster-p5": False, "parallelcluster-p5en-capacity-block": True}


def test_the_mounts_script_refuses_a_mount_nothing_would_mount():
    bare = Mount(store="toy", id="Toy", path="/toy", fstype="toyfs", source="toy:/")
    with pytest.raises(ValueError, match="store toy has neither ParallelCluster's SharedStorage form nor a boot"):
        mounts_script([bare], os="alinux2023")


def s3_mount(built) -> Mount:
    stacks, _ = built
    (mount,) = [m for m in stacks.cluster.context.mounts if m.store == "mountpoint-s3"]
    return mount


def test_the_mounts_script_installs_the_rpm_on_rpm_systems_and_never_fails_the_node(built):
    mount = s3_mount(built)
    for os in ("alinux2023", "rhel8", "rocky9"):
        text = mounts_script([mount], os=os)
        assert mount.boot.client.install_on(os) in text and "dnf install -y -q ./p.rpm" in text, os
        assert text.endswith("exit 0\n") and "set -e" not in text
    assert "FMCLUSTER_POLICY" not in text  # the validator judges a failed mount on compute nodes
    toy = Mount(store="toy", id="Toy", path="/toy", fstype="toyfs", source="toy:/",
                boot=BootMount(command="mount /toy", failure="toy mount failed"))
    assert "mount /toy || echo 'fmcluster: toy mount failed'\n" in mounts_script([toy], os="ubuntu2404")


def _render(data: Dict[str, Any]) -> Dict[str, Any]:
    """The configuration as the provider receives it, references replaced by placeholders that keep differences."""
    from fmcluster.app import synthesize

    spec = registry.parse_spec(data)
    return with_placeholders(configuration(synthesize(spec)[spec.stack_name("cluster")]), distinct=True)


def test_parallelclusters_update_checker_refuses_adding_the_store_to_a_running_cluster(built, pcluster_python,
                                                                                       tmp_path):
    """The head node's OnNodeConfigured becomes a Sequence, and ParallelCluster updates no head node OnNodeConfigured
    (UNSUPPORTED): the store is added when the cluster is created (docs/parallelcluster.md)."""
    _, template = built
    without = yaml.safe_load((ROOT / "examples" / f"{EXAMPLE}.yaml").read_text())
    code, report = pcluster_update_check(pcluster_python, _render(without),
                                         with_placeholders(configuration(template), distinct=True), "pc-p5", tmp_path)
    assert code == 1 and not report["allowed"]
    refused = {(tuple(c["path"]), c["parameter"]) for c in report["changes"] if c["policy"] == "UNSUPPORTED"}
    assert (("HeadNode", "CustomActions"), "OnNodeConfigured") in refused, report["changes"]


def test_changing_the_section_later_replaces_no_compute_node(built, pcluster_python, tmp_path):
    """mounts.sh keeps its key: a new prefix changes only the head node's OnNodeUpdated revision (SUPPORTED); compute
    nodes read the new script when they are next launched."""
    _, template = built
    changed = spec_data()
    changed["storage"]["mountpoint_s3"]["prefix"] = "other/"
    code, report = pcluster_update_check(pcluster_python, with_placeholders(configuration(template), distinct=True),
                                         _render(changed), "pc-p5", tmp_path)
    assert code == 0 and report["allowed"], report["changes"]
    assert [(c["path"], c["parameter"], c["policy"]) for c in report["changes"]] == [
        (["HeadNode", "CustomActions", "OnNodeUpdated"], "Sequence", "SUPPORTED")]


def test_every_os_the_kind_takes_installs_the_client(built):
    """Each Image.Os the kind's settings accept has the store's install lines (else synth refuses, naming the client)."""
    from typing import get_args

    from fmcluster.orchestrators.parallelcluster.settings import OperatingSystem

    mount = s3_mount(built)
    for os in get_args(OperatingSystem):
        assert "/mount-s3-" in mounts_script([mount], os=os), os
    with pytest.raises(ValueError, match="no way to install mount-s3 on 'alinux2'"):
        mounts_script([mount], os="alinux2")


def test_the_mounts_stop_at_their_budget_and_stamp_where_the_window_started(tmp_path):
    """A mount that hangs is cut at the script's budget (here 1 s, 600 s by default), the node goes on (exit 0), and the
    stamp tells fmcluster's action when the window began and how long the mounts could take."""
    import subprocess

    hung = Mount(store="toy", id="Toy", path="/toy", fstype="toyfs", source="toy:/",
                 boot=BootMount(command="sleep 30", failure="toy mount failed"))
    script = tmp_path / "mounts.sh"
    script.write_text(mounts_script([hung], os="ubuntu2404"))
    stamp = tmp_path / "run" / "action-started"
    env = {"PATH": "/usr/bin:/bin", "FMCLUSTER_MOUNTS_BUDGET": "1", "FMCLUSTER_ACTION_STAMP": str(stamp)}
    r = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=25)
    assert r.returncode == 0 and "the mounts ended unfinished after at most 1s" in r.stdout
    start, budget = stamp.read_text().split()
    assert start.isdigit() and budget == "1"
    assert f"budget=${{FMCLUSTER_MOUNTS_BUDGET:-{BUDGET_S}}}" in mounts_script([hung], os="ubuntu2404")


def test_the_published_script_parses_and_is_shellcheck_clean(built, tmp_path):
    """mounts.sh as the deployment writes it (the bucket's import resolved to a name)."""
    import shutil
    import subprocess

    stacks, _ = built
    resolved = stacks.cluster.resolve(stacks.cluster.orchestration.construct.assets.mounts)
    text = "".join(p if isinstance(p, str) else "fm-checkpoints" for p in resolved["Fn::Join"][1])
    path = tmp_path / "mounts.sh"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)], timeout=60).returncode == 0
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    r = subprocess.run([shellcheck, str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
