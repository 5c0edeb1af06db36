"""A new cluster's Kubernetes version is chosen once and written down: `init` writes the newest version in EKS
standard support that the kind supports, and `validate` warns (exit 0) when a spec leaves the version to fmcluster's
default or runs one in extended support, with what that costs a month. The day is tests/conftest.py's."""

from __future__ import annotations

from datetime import date

import pytest
import yaml

from fmcluster.cli import main
from fmcluster.platforms.kubernetes import support

ADMIN = "arn:aws:iam::123456789012:role/ml-admin"
SPEC = """name: kk
region: us-east-1
availability_zone: us-east-1a
network: {new_vpc: {cidr: 10.0.0.0/16}}
orchestrator: {type: eks, eks: {admins: [ADMIN]EXTRA}}
node_groups: [{name: gpu, instance_type: p5.48xlarge, count: 2, capacity: {type: odcr, reservation_id: cr-0123456789abcdef0}}]
""".replace("ADMIN", ADMIN)  # reserved capacity: validate's only warnings here are the version's


@pytest.mark.parametrize("kind, written", [("eks", "1.35"), ("hyperpod-eks", "1.34")])
def test_init_writes_the_newest_version_in_standard_support_the_kind_supports(tmp_path, capsys, kind, written):
    """eks: 1.35 (1.34 left standard support on 2026-12-02). hyperpod-eks supports 1.33 and 1.34, both past it: its
    newest, which validate then warns about."""
    path = tmp_path / "c.yaml"
    assert main(["init", str(path), "--orchestrator", kind, "--instance-type", "p5.48xlarge", "--count", "2",
                 "--region", "us-east-1", "--admin", ADMIN]) == 0
    assert yaml.safe_load(path.read_text())["orchestrator"]["eks"]["kubernetes_version"] == written
    capsys.readouterr()
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    assert ("extended support" in err) == (kind == "hyperpod-eks") and "not set" not in err


def test_a_spec_without_a_version_is_warned_that_the_default_applies_and_what_it_costs(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(SPEC.replace("EXTRA", ""))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith(f"{path}: valid")
    assert out.err.splitlines() == [
        "warning: orchestrator.eks.kubernetes_version: not set: fmcluster's default, 1.34, applies. A later fmcluster "
        "may default to another version, and the next deploy would then upgrade the control plane: write "
        "kubernetes_version: \"1.34\" into the spec (fmcluster init does)",
        "warning: orchestrator.eks.kubernetes_version: Kubernetes 1.34 left EKS standard support on 2026-12-02: the "
        "control plane bills extended support; 1.35 is in standard support until 2027-03-27 ($0.60 instead of $0.10 "
        "per cluster-hour: about $365 more a month)"]


def test_a_version_in_standard_support_written_down_is_not_warned_about_until_it_leaves_it(tmp_path, capsys,
                                                                                         monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_text(SPEC.replace("EXTRA", ', kubernetes_version: "1.35"'))
    assert main(["validate", str(path)]) == 0 and capsys.readouterr().err == ""
    monkeypatch.setattr(support, "today", lambda: date(2027, 3, 27))
    assert main(["validate", str(path)]) == 0
    assert "Kubernetes 1.35 left EKS standard support on 2027-03-27" in capsys.readouterr().err


def test_the_default_is_not_moved_under_deployed_clusters():
    """A spec that omits the version deploys what the default names; moving the default would upgrade such clusters'
    control planes on their next deploy, so it stays until a release says so (docs/eks.md, "Kubernetes version")."""
    from fmcluster.platforms.kubernetes.versions import DEFAULT_KUBERNETES_VERSION

    assert DEFAULT_KUBERNETES_VERSION == "1.34"
