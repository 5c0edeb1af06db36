"""`fmcluster init FILE`: a new spec from flags, validated before it is written, never over an existing file; every
refusal exit 2 with the flag and what it takes, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster import registry
from fmcluster.cli import main
from fmcluster.registry import load_spec

DEFAULT_KIND = registry.BUILT_IN[0].name
BASE = ["--orchestrator", DEFAULT_KIND, "--instance-type", "p5.48xlarge", "--count", "2", "--region", "us-west-2"]


def init(tmp_path, capsys, *flags):
    spec = tmp_path / "cluster.yaml"
    code = main(["init", str(spec), *flags])
    return code, spec, capsys.readouterr()


def test_the_spec_written_is_valid_and_says_what_was_asked(tmp_path, capsys):
    code, spec, out = init(tmp_path, capsys, *BASE, "--alert-email", "ops@example.com")
    assert code == 0 and out.out.splitlines()[0] == f"fmcluster validate {spec}"
    s = load_spec(spec)
    (group,) = s.node_groups
    assert (s.region, s.availability_zone, group.instance_type, group.count) == ("us-west-2", "us-west-2a",
                                                                                 "p5.48xlarge", 2)
    assert group.name == "h100" and s.storage.fsx is not None and s.observability.alert_emails == ["ops@example.com"]


def test_an_existing_file_is_never_replaced(tmp_path, capsys):
    spec = tmp_path / "cluster.yaml"
    spec.write_text("mine\n")
    assert main(["init", str(spec), *BASE]) == 2
    assert f"{spec}: already exists" in capsys.readouterr().err and spec.read_text() == "mine\n"
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.yaml"]


@pytest.mark.parametrize("flags, says", [
    (["--orchestrator", "slurm"], "invalid choice: 'slurm' (choose from"),
    (["--capacity", "spot"], "invalid choice: 'spot' (choose from 'on-demand', 'odcr', 'capacity-block', 'training-plan')"),
    (["--count", "two"], "--count: 'two': a whole number of instances, 1-2048"),
    (["--capacity", "capacity-block"], "--reservation-id: --capacity capacity-block needs the reservation's id"),
    (["--capacity", "training-plan", "--training-plan-arn", "arn:aws:sagemaker:us-west-2:123456789012:training-plan/x"],
     "--capacity: orchestrator"),
    (["--instance-type", "p9.48xlarge"], "node_groups[0].instance_type: unknown instance type 'p9.48xlarge'; allowed:"),
])
def test_a_bad_answer_is_exit_2_with_what_is_allowed_and_nothing_written(tmp_path, capsys, flags, says):
    code, spec, out = init(tmp_path, capsys, *BASE, *flags)
    assert code == 2 and says in out.err and "Traceback" not in out.err
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_said_not_created(tmp_path, capsys):
    assert main(["init", str(tmp_path / "no" / "cluster.yaml"), *BASE]) == 2
    assert "no directory" in capsys.readouterr().err and not (tmp_path / "no").exists()


def test_the_readmes_first_screen_is_the_first_page_path():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    first = readme[readme.index("```bash", readme.index("## Your first cluster")):]
    first = first[:first.index("```", 7)]
    steps = ["fmcluster init", "fmcluster validate", "fmcluster plan", "fmcluster synth", "npx cdk deploy",
             "docs/access.md", "fmcluster job nccl", "docs/teardown.md"]
    at = [first.index(step) for step in steps]
    assert at == sorted(at), "the steps in the order a new user takes them"
    assert readme.index("## Your first cluster") < 1500, "on the first screen"


def test_the_reservations_size_is_written_so_a_count_it_cannot_hold_is_refused_offline(tmp_path, capsys):
    block = ["--capacity", "capacity-block", "--reservation-id", "cr-0123456789abcdef0", "--reservation-size"]
    code, spec, out = init(tmp_path, capsys, *BASE, *block, "16")
    assert code == 0 and load_spec(spec).node_groups[0].capacity.size == 16
    spec.unlink()
    code, spec, out = init(tmp_path, capsys, *BASE[:-4], "--count", "16", "--region", "us-west-2", *block, "8")
    assert code == 2 and "16 exceeds capacity.size 8 of the reservation" in out.err and not spec.exists()
    code, spec, out = init(tmp_path, capsys, *BASE, "--reservation-size", "8")
    assert code == 2 and "--reservation-size: applies with --capacity odcr, capacity-block or training-plan" in out.err


def test_no_fsx_leaves_the_file_system_out_as_it_always_did(tmp_path, capsys):
    code, spec, _ = init(tmp_path, capsys, *BASE, "--no-fsx")
    assert code == 0 and load_spec(spec).storage.file_system() is None
    assert "storage:" not in spec.read_text()


def test_each_store_offering_init_a_section_says_its_own_no_flag(monkeypatch, capsys):
    """The flag is the store's: --no-<its spec key>, its help the store's title (the file system's: --no-fsx)."""
    import dataclasses

    from fmcluster.platforms.storage import Store

    @dataclasses.dataclass(frozen=True)
    class Offered(Store):
        def init_section(self):
            return {"mount_point": "/toy"}

    toy = Offered(name="toy", title="Toy Store", spec_key="toy_store", resources="a toy")
    monkeypatch.setattr(registry, "STORES", [*registry.STORES, toy])
    with pytest.raises(SystemExit):
        main(["init", "--help"])
    help_ = " ".join(capsys.readouterr().out.split())
    assert "--no-fsx No FSx for Lustre file system." in help_ and "--no-toy-store No Toy Store." in help_
