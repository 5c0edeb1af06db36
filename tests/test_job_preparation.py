"""The first job's preparation on each kind's default image (helpers/job_images.py: what each image holds, from its
public sources): it finds the image's nccl-tests, or builds NCCL and nccl-tests once, from pinned and checksummed
sources, onto storage every node mounts; it refuses what it cannot run and says why (exit 2)."""

from __future__ import annotations

import os
import tarfile

import pytest
from helpers import ROOT
from helpers.job_images import IMAGE_OF_KIND, NCCL_SOURCE, archive, prepare, sources

from fmcluster.cli.job_command import fabric_group
from fmcluster.registry import load_spec

EXAMPLES = ROOT / "examples"
# one example per kind, the one a reader starts from
EXAMPLE_OF_KIND = {"none": "default.yaml", "pcs": "pcs-p5.yaml", "hyperpod-slurm": "hyperpod-slurm-p5.yaml",
                   "parallelcluster": "parallelcluster-p5.yaml", "eks": "eks-p5.yaml",
                   "hyperpod-eks": "hyperpod-eks-p5.yaml"}


def written(example: str) -> str:
    """The job `fmcluster job nccl` writes for an example spec."""
    from fmcluster.cli.job_command import render

    spec = load_spec(EXAMPLES / example)
    group = fabric_group(spec, None)
    text = spec.orchestrator_kind.fabric_job(spec, group, image=None, spec_file=f"examples/{example}")
    return text if text is not None else render(spec, group, f"examples/{example}")


def test_every_kind_has_an_example_and_an_image_stand_in():
    kinds = {load_spec(p).orchestrator.type for p in EXAMPLES.glob("*.yaml")}
    assert kinds == set(EXAMPLE_OF_KIND) == set(IMAGE_OF_KIND)


@pytest.mark.parametrize("kind,tests_dir,builds", [
    ("none", "usr/local/cuda-13.2/efa/test-cuda-13.2", False),  # the newest CUDA's build on the Deep Learning AMI
    ("pcs", "usr/local/cuda-13.2/efa/test-cuda-13.2", False),
    ("hyperpod-slurm", "fsx/fmcluster/nccl/nccl-2.30.4-1-tests-2.18.3-{arch}/nccl-tests/build", True),
    ("parallelcluster", "home/ml/.fmcluster/nccl/nccl-2.30.4-1-tests-2.18.3-{arch}/nccl-tests/build", True),
    ("eks", "opt/nccl-tests/build", False),  # the MPIJob's container image
    ("hyperpod-eks", "opt/nccl-tests/build", False),
])
def test_the_first_job_prepares_on_its_kinds_default_image(tmp_path, kind, tests_dir, builds):
    import platform

    job = written(EXAMPLE_OF_KIND[kind])
    root = tmp_path / "image"
    p = prepare(job, kind, tmp_path, root=root)
    assert p.rc == 0, p.stderr
    assert p.tests_dir == str(root / tests_dir.format(arch=platform.machine()))
    assert any(c.startswith("make ") for c in p.calls) == builds
    if kind in ("eks", "hyperpod-eks"):
        return  # the container image's environment is the image's own
    assert str(root / "opt/amazon/ofi-nccl/lib") in p.library_path, "aws-ofi-nccl, else NCCL falls back to TCP"
    if not builds:
        assert p.library_path[0] == str(root / "usr/local/cuda-13.2/lib"), "the NCCL those tests link"


def test_the_build_uses_the_images_cuda_and_mpi_for_this_gpu_and_happens_once(tmp_path):
    job = written(EXAMPLE_OF_KIND["parallelcluster"])
    first = prepare(job, "parallelcluster", tmp_path)
    assert first.rc == 0, first.stderr
    makes = [c for c in first.calls if c.startswith("make ")]
    assert len(makes) == 2 and all("NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90" in m for m in makes)
    root = tmp_path / "image"
    assert f"CUDA_HOME={root}/usr/local/cuda" in makes[0] and "src.build" in makes[0]
    assert f"MPI_HOME={root}/opt/amazon/openmpi" in makes[1] and "MPI=1" in makes[1]
    assert [c for c in first.calls if c.startswith("curl ")] == [
        "curl https://github.com/NVIDIA/nccl/archive/1933fdd6360a8bfccaa0166bd71bce363d32e5b6.tar.gz",
        "curl https://github.com/NVIDIA/nccl-tests/archive/f727aa2a540fef911de9d7bfd8852bc5d2c69815.tar.gz"]
    (tmp_path / "calls.log").unlink()
    again = prepare(job, "parallelcluster", tmp_path)
    assert again.rc == 0 and again.tests_dir == first.tests_dir
    assert again.calls == [], "a later job reuses the build"
    nccl_lib = first.tests_dir.replace("/nccl-tests/build", "/nccl/build/lib")
    assert again.library_path[0] == nccl_lib or nccl_lib in again.library_path


def test_a_source_whose_content_is_not_the_pins_is_refused_and_nothing_is_built(tmp_path):
    job = written(EXAMPLE_OF_KIND["parallelcluster"])
    pins = sources(tmp_path / "sources")
    archive(tmp_path / "sources" / "nccl.tar.gz", "nccl-0000", {**NCCL_SOURCE, "src/init.cc": b"// changed\n"})
    p = prepare(job, "parallelcluster", tmp_path, pins=pins)
    assert p.rc == 2 and "refusing to build it" in p.stderr and "NCCL (NVIDIA/nccl@" in p.stderr
    assert not any(c.startswith("make ") for c in p.calls)
    built = tmp_path / "image/home/ml/.fmcluster/nccl"
    assert [p.name for p in built.iterdir() if not p.name.startswith(".")] == [], "no build, no staging left"


def test_an_archive_reaching_outside_its_directory_is_refused(tmp_path):
    job = written(EXAMPLE_OF_KIND["parallelcluster"])
    pins = sources(tmp_path / "sources")
    escape = tarfile.TarInfo("nccl-0000/../../evil")
    escape.size = 1
    archive(tmp_path / "sources" / "nccl.tar.gz", "nccl-0000", NCCL_SOURCE, extra=escape)
    p = prepare(job, "parallelcluster", tmp_path, pins=pins)
    assert p.rc == 2 and "unsafe path" in p.stderr and not (tmp_path / "evil").exists()


def test_a_failed_build_shows_its_log_tail_and_fails(tmp_path):
    p = prepare(written(EXAMPLE_OF_KIND["parallelcluster"]), "parallelcluster", tmp_path, env={"FAKE_MAKE_RC": "2"})
    assert p.rc == 2 and "the build failed (exit 2)" in p.stderr and "build.log" in p.stderr


def test_without_aws_ofi_nccl_the_job_stops_rather_than_run_nccl_over_tcp(tmp_path):
    root = tmp_path / "image"
    from helpers.job_images import image

    image(root, "none")
    (root / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so").unlink()
    p = prepare(written(EXAMPLE_OF_KIND["none"]), "none", tmp_path, root=root)
    assert p.rc == 2 and "no aws-ofi-nccl" in p.stderr and "TCP" in p.stderr


def test_an_image_without_nccl_tests_and_no_shared_directory_is_a_clear_error(tmp_path):
    """pcs-p5 has no shared file system; an image without the Deep Learning AMI's build leaves nowhere to build."""
    p = prepare(written(EXAMPLE_OF_KIND["pcs"]), "parallelcluster", tmp_path)
    assert p.rc == 2 and "NCCL_TESTS_DIR" in p.stderr and "NCCL_BUILD_ROOT" in p.stderr


def test_the_build_root_follows_the_kind_and_the_spec():
    from fmcluster.cli.job_command import build_root

    assert build_root(load_spec(EXAMPLES / "parallelcluster-p5.yaml")) == "$HOME/.fmcluster/nccl"  # /home is shared
    assert build_root(load_spec(EXAMPLES / "hyperpod-slurm-p5.yaml")) == "/fsx/fmcluster/nccl"
    assert build_root(load_spec(EXAMPLES / "pcs-p5.yaml")) == ""  # no shared file system: the job says so


def test_the_pins_are_what_the_refresh_tool_computes_from_a_clone(tmp_path):
    """scripts/nccl_source_digest.py (run on a clone when the pins move) and the job's own check agree on a tree with
    a plain file, an executable and a link, and on GitHub's kind of archive of it (git archive, gzipped)."""
    import importlib.util
    import subprocess

    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "Makefile").write_text("all:\n")
    (repo / "src" / "gen.sh").write_text("#!/bin/sh\n")
    (repo / "src" / "gen.sh").chmod(0o755)
    (repo / "src" / "link").symlink_to("gen.sh")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(git + args, check=True, timeout=60)
    spec = importlib.util.spec_from_file_location("nccl_source_digest", ROOT / "scripts" / "nccl_source_digest.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    commit, digest = tool.tree_digest(str(repo), "HEAD")
    tarball = tmp_path / "archive.tar.gz"
    with tarball.open("wb") as out:
        subprocess.run(git + ["archive", "--format=tar.gz", f"--prefix=repo-{commit}/", commit], stdout=out,
                       check=True, timeout=60)
    script = (ROOT / "fmcluster" / "acceptance" / "nccl-tests.sbatch").read_text()
    program = script.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    r = subprocess.run(["python3", "-", str(tarball), str(tmp_path / "unpacked")], input=program, text=True,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == digest
    assert (tmp_path / "unpacked" / "src" / "link").is_symlink() and os.access(tmp_path / "unpacked/src/gen.sh", os.X_OK)
