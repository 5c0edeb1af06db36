"""Fixture nodes for the runtime validator: a healthy tree to break, and the validator run on it.

A test gets a node tree of its own that is byte for byte the committed fixture. Copying ~600 files and ~200
directories costs more than the validation itself, so each test session keeps a few trees per type and, before
handing one out, compares it with the fixture (every entry, its content, mode and link target) and puts back what an
earlier test changed, added or removed. `run` calls the validator's entry point in this process with the environment
a node's shell gives it; `run_cli` starts it as a node does (`python -m`, a bare environment).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
NODES = REPO / "tests" / "fixtures" / "nodes"
TYPES = ["p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"]
SYSTEM_PATH = "/usr/bin:/bin"
KEEP = "keep the fixture's"  # set_stack: leave this component as the fixture has it
# The boot units of the EKS-optimized AL2023 AMI in the order they run (amazon-eks-ami,
# templates/al2023/runtime/rootfs/etc/systemd/system/: nodeadm-config.service is Before=cloud-init.service and runs
# `nodeadm init --skip run`; nodeadm-run.service is After=nodeadm-config.service cloud-final.service and runs the run
# phase, whose aspects set up the local disks before kubelet starts: nodeadm/cmd/nodeadm/init/init.go). User data is
# part of cloud-final.service.
EKS_BOOT_ORDER = ("nodeadm-config.service", "cloud-final.service", "nodeadm-run.service")


class FixtureNode:
    def __init__(self, base: Path, itype: str) -> None:
        self.base = base
        self.itype = itype
        self.root = base / "root"
        self.bin = base / "bin"

    # ---- editing -------------------------------------------------------------------------------------
    def write(self, rel: str, text: str) -> None:
        p = self.root / rel.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def append(self, rel: str, text: str) -> None:
        p = self.root / rel.lstrip("/")
        p.write_text(p.read_text() + text)

    def remove(self, rel: str) -> None:
        p = self.root / rel.lstrip("/")
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()

    def tool(self, name: str, body: str) -> None:
        p = self.bin / name
        p.write_text("#!/bin/sh\n" + body)
        p.chmod(0o755)

    def edit_tool(self, name: str, old: str, new: str, count: int = -1) -> None:
        p = self.bin / name
        text = p.read_text()
        assert old in text, f"{old!r} not in {name}"
        p.write_text(text.replace(old, new, count))

    def set_stack(self, *, driver: str, cuda: Optional[str], efa_installer: str, libfabric: str, aws_ofi_nccl: str,
                  dcgm: Optional[str], nccl: Optional[str] = KEEP, gdrcopy: Optional[str] = KEEP) -> None:
        """Rewrite the installed versions everywhere the node shows them (module, /proc, nvidia-smi, CUDA,
        the EFA installer's package list, fi_info, the plugin library, dcgmi, libnccl, gdrdrv), as an older or newer
        AMI would. None: the AMI has no such component (no CUDA toolkit, no dcgmi, no system NCCL, no gdrdrv), so it is
        removed; KEEP (nccl, gdrcopy): the fixture's (NCCL 2.28.3, gdrcopy 2.5.2)."""
        old = {"driver": "595.91.07", "libfabric": "2.6.0amzn1.0", "ofi": "aws-ofi-nccl 1.21.1", "dcgm": "4.7.0"}
        for rel in ("/sys/module/nvidia/version", "/proc/driver/nvidia/version", "/dev/kmsg"):
            self.write(rel, (self.root / rel.lstrip("/")).read_text().replace(old["driver"], driver))
        self.edit_tool("nvidia-smi", old["driver"], driver)
        for lib in self.root.glob(f"usr/lib*/**/*.so.{old['driver']}"):  # user-space libraries carry the release
            lib.rename(lib.with_name(lib.name.replace(old["driver"], driver)))
        if cuda is None:
            self.remove("/usr/local/cuda")
        else:
            self.write("/usr/local/cuda/version.json",
                       json.dumps({"cuda": {"name": "CUDA SDK", "version": cuda}}, indent=3) + "\n")
        packages = (self.root / "opt/amazon/efa_installed_packages").read_text()
        packages = packages.replace("EFA installer version: 1.50.0", f"EFA installer version: {efa_installer}")
        self.write("/opt/amazon/efa_installed_packages", packages.replace(old["libfabric"], libfabric))
        self.edit_tool("fi_info", old["libfabric"], libfabric)
        lib = self.root / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"
        lib.write_text(lib.read_text().replace(old["ofi"], f"aws-ofi-nccl {aws_ofi_nccl}"))
        if dcgm is None:
            (self.bin / "dcgmi").unlink()
        else:
            self.edit_tool("dcgmi", old["dcgm"], dcgm)
        if nccl is not KEEP:
            lib = self.root / "usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3"
            if nccl is None:
                lib.unlink()
            else:
                lib.rename(lib.with_name(f"libnccl.so.{nccl}"))
        if gdrcopy is not KEEP:
            if gdrcopy is None:
                self.remove("/sys/module/gdrdrv")
                self.remove("/dev/gdrdrv")
            else:
                self.write("/sys/module/gdrdrv/version", gdrcopy + "\n")

    def eks_al2023(self, driver: str, disks: str, *, after: str, bound_at: Optional[str] = None) -> None:
        """Turn the DLAMI node into what the EKS-optimized AL2023 NVIDIA AMI carries (amazon-eks-ami CHANGELOG and its
        al2023 provisioners): the NVIDIA open kernel module `driver` with its user-space libraries in /usr/lib64, kernel
        6.12, the EFA kernel module and rdma-core only (aws-efa-installer --minimal: no libfabric, fi_info or
        aws-ofi-nccl on the host), no CUDA toolkit, DCGM or GDRCopy, containerd instead of docker.

        `after`: the boot unit that has just ended (EKS_BOOT_ORDER). User data runs in cloud-final.service, before
        nodeadm-run.service has assembled the instance NVMe or started kubelet; after nodeadm-run.service nodeadm's
        RAID0 of the instance NVMe is mounted on `disks` (xfs) and kubelet is active; with `bound_at`, a directory of the
        array is also bound there, as fmcluster's boot-validation unit does before its validator runs (a bind mount's
        /proc/mounts line names the array's device, file system and options). Synthesized, not captured: no public
        capture of such a node exists."""
        if after not in EKS_BOOT_ORDER:
            raise ValueError(f"after: {after!r} is not one of {EKS_BOOT_ORDER}")
        root = self.root
        for path in [*root.rglob("*"), *self.bin.iterdir()]:
            if path.is_file() and not path.is_symlink():
                text = path.read_text(errors="replace")
                if "595.91.07" in text:
                    path.write_text(text.replace("595.91.07", driver))
        version = root / "proc/driver/nvidia/version"
        version.write_text(re.sub(r"GCC version:.*", "GCC version:  gcc version 11.5.0 20240719 (Red Hat 11.5.0-5) (GCC)",
                                  version.read_text()))
        lib = next(root.glob("usr/lib/x86_64-linux-gnu/libnvidia-ml.so.*"))
        (root / "usr/lib64").mkdir(parents=True, exist_ok=True)
        lib.rename(root / f"usr/lib64/libnvidia-ml.so.{driver}")
        (root / "proc/sys/kernel/osrelease").write_text("6.12.37-61.105.amzn2023.x86_64\n")
        # aws-efa-installer --minimal: kernel module and rdma-core; libfabric, its tools and aws-ofi-nccl live in containers
        shutil.rmtree(root / "opt/amazon")
        shutil.rmtree(root / "usr/local/cuda")
        for tool in ("fi_info", "fi_pingpong", "all_reduce_perf", "torch-python", "dcgmi", "scontrol"):
            (self.bin / tool).unlink()
        for gone in ("sys/module/gdrdrv", "dev/gdrdrv", "usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3"):
            self.remove(gone)
        for gone in ("etc/docker", "etc/enroot", "usr/bin/dockerd"):
            target = root / gone
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        mounts = (root / "proc/mounts").read_text()
        mounts = mounts.replace("/dev/nvme0n1p1 / ext4 rw,relatime,discard,errors=remount-ro 0 0",
                                "/dev/nvme0n1p1 / xfs rw,noatime,attr2,inode64,logbufs=8,logbsize=32k,noquota 0 0")
        raid0 = (f"/dev/md127 {disks} xfs rw,relatime,attr2,inode64,logbufs=8,logbsize=32k,sunit=1024,swidth=8192,"
                 "noquota 0 0")
        disks_up = EKS_BOOT_ORDER.index(after) >= EKS_BOOT_ORDER.index("nodeadm-run.service")
        dlami_nvme = "/dev/mapper/vg.01-lv_ephemeral /opt/dlami/nvme ext4 rw,relatime 0 0"
        assert dlami_nvme in mounts
        bound = raid0.replace(f" {disks} ", f" {bound_at} ") + "\n" if bound_at else ""
        mounts = mounts.replace(dlami_nvme + "\n", raid0 + "\n" + bound if disks_up else "")
        (root / "proc/mounts").write_text(mounts)
        # df answers for the xfs array once nodeadm has made it: about 0.1% less than the 30.4 TB of disks (log and
        # allocation-group headers; our figure)
        answers = "|".join([disks] + ([bound_at] if bound_at else []))
        self.edit_tool("df", "  /opt/dlami/nvme) size=29914365718528 ;;\n",
                       f"  {answers}) size=30371874439168 ;;\n" if disks_up else "")
        # kubelet.service is not enabled on the AMI: nodeadm-run.service starts it (nodeadm init's run phase)
        self.tool("systemctl", '[ "$1" = "is-active" ] || { echo "fake systemctl: unsupported: $*" >&2; exit 1; }\n'
                               'shift\nfor u in "$@"; do\n'
                               f'  if [ "$u" = kubelet ]; then echo {"active" if disks_up else "inactive"}; '
                               'else echo active; fi\ndone\n')
        (root / "etc/containerd").mkdir(parents=True, exist_ok=True)
        (root / "etc/containerd/config.toml").write_text('version = 3\nroot = "/var/lib/containerd"\n')

    def profile(self, **overrides) -> Path:
        from fmcluster.runtime.profile import NodeProfile

        overrides.setdefault("mounts", [{"path": "/fsx", "fstype": "lustre"}])
        overrides.setdefault("orchestrator", "slurm")
        path = self.base / "profile.json"
        path.write_text(NodeProfile.from_catalog(self.itype, **overrides).to_json())
        return path

    # ---- running -------------------------------------------------------------------------------------
    def _argv(self, args: Tuple[str, ...], profile: Optional[Path]) -> List[str]:
        return ["--profile", str(profile or self.profile()), "--root", str(self.root), "--format", "json", *args]

    def _env(self, env: Optional[dict]) -> Dict[str, str]:
        """The whole environment the validator sees: the node's tools first on PATH, nothing of the test runner's."""
        return {"PATH": f"{self.bin}:{SYSTEM_PATH}", "PYTHONPATH": str(REPO), "HOME": str(self.base), **(env or {})}

    def run(self, *args: str, profile: Optional[Path] = None, env: Optional[dict] = None, timeout: float = 60):
        """validate.main(argv) in this process, under exactly the environment and working directory run_cli gives
        the command; the report, exit code and streams are the command's."""
        from fmcluster.runtime import validate

        return _result(*self.call(validate.main, self._argv(args, profile), env=env, timeout=timeout))

    def call(self, main: Callable[[List[str]], int], argv: List[str], *, env: Optional[dict] = None,
             timeout: float = 60) -> Tuple[int, str, str]:
        """A node-side command's main(argv) in this process with this node's environment (run_main)."""
        return run_main(main, argv, env=self._env(env), cwd=self.base, timeout=timeout)

    def run_cli(self, *args: str, profile: Optional[Path] = None, env: Optional[dict] = None, timeout: float = 60):
        """`python -m fmcluster.runtime.validate` as a node runs it: a process of its own, a bare environment."""
        cmd = [sys.executable, "-m", "fmcluster.runtime.validate", *self._argv(args, profile)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self._env(env),
                              cwd=str(self.base))
        return _result(proc.returncode, proc.stdout, proc.stderr)


def run_main(main: Callable[[List[str]], int], argv: List[str], *, env: Dict[str, str], cwd: Path,
             timeout: float = 60) -> Tuple[int, str, str]:
    """A node-side command's main(argv) in this process, as `python -m` would run it with env and cwd: os.environ is
    exactly env (the tools it starts inherit it), the working directory is cwd, stdout and stderr are captured;
    (exit status, stdout, stderr). A call still running after timeout fails the test, as the command's would."""
    out, err = io.StringIO(), io.StringIO()
    answer: List[object] = []
    name = getattr(main, "__module__", "main")

    def call() -> None:
        try:
            answer.append(main(argv))
        except SystemExit as exc:  # argparse's usage errors and --help end the process with this status
            answer.append(exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1)
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            answer.append(exc)

    with _environment(env, cwd=cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        worker = threading.Thread(target=call, name=name, daemon=True)
        worker.start()
        worker.join(timeout)
    if worker.is_alive():
        pytest.fail(f"{name} did not return within {timeout}s")
    [rc] = answer
    if isinstance(rc, BaseException):
        raise rc
    assert isinstance(rc, int), rc
    return rc, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def _environment(env: Dict[str, str], cwd: Path) -> Iterator[None]:
    """os.environ is exactly env (the tools the validator starts inherit it) and the working directory is cwd; both
    are put back afterwards."""
    saved, here = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)


def _result(rc: int, stdout: str, stderr: str) -> Result:
    report = json.loads(stdout) if stdout.strip().startswith("{") else None
    return Result(rc, report, stdout, stderr)


class Result:
    def __init__(self, rc: int, report: dict | None, stdout: str, stderr: str) -> None:
        self.rc = rc
        self.report = report
        self.stdout = stdout
        self.stderr = stderr

    def status(self, cid: str) -> str:
        assert self.report is not None, self.stderr
        return self.check(cid)["status"]

    def failed(self) -> list:
        """(id, observed, detail) of every failed check, for assertion messages."""
        assert self.report is not None, self.stderr
        return [(c["id"], c.get("observed"), c.get("detail")) for c in self.report["checks"] if c["status"] == "fail"]

    def check(self, cid: str) -> dict:
        assert self.report is not None, self.stderr
        for c in self.report["checks"]:
            if c["id"] == cid:
                return c
        raise KeyError(cid)

    def not_passing(self) -> dict:
        assert self.report is not None, self.stderr
        return {c["id"]: c["status"] for c in self.report["checks"] if c["status"] not in ("pass", "skip")}


# ---- the trees -----------------------------------------------------------------------------------------
# An entry of a tree: ("dir", mode), ("file", mode, content), ("link", target) or ("other",) (a FIFO, a socket).
Entry = Tuple[object, ...]


def _entries(top: Path) -> Dict[str, Entry]:
    """Every entry under top by relative path, symlinks not followed."""
    found: Dict[str, Entry] = {}
    root = str(top)
    pending = [""]
    while pending:
        rel = pending.pop()
        with os.scandir(os.path.join(root, rel)) as listing:
            for entry in listing:
                path = os.path.join(rel, entry.name)
                if entry.is_symlink():
                    found[path] = ("link", os.readlink(entry.path))
                elif entry.is_dir():
                    found[path] = ("dir", stat.S_IMODE(entry.stat().st_mode))
                    pending.append(path)
                elif entry.is_file():
                    fd = os.open(entry.path, os.O_RDONLY)
                    try:
                        mode = stat.S_IMODE(os.fstat(fd).st_mode)
                        chunks = []
                        while True:
                            chunk = os.read(fd, 1 << 20)
                            if not chunk:
                                break
                            chunks.append(chunk)
                    finally:
                        os.close(fd)
                    found[path] = ("file", mode, b"".join(chunks))
                else:
                    found[path] = ("other",)
    return found


def reset_tree(top: Path, want: Dict[str, Entry]) -> int:
    """Make top hold exactly want (content, modes, link targets, no other entry); the number of entries changed."""
    have = _entries(top)
    changed = 0
    for path in sorted(have, reverse=True):  # children before their directories
        if have[path] == want.get(path):
            continue
        if path in want and have[path][0] == want[path][0] == "dir":  # only its mode differs
            os.chmod(top / path, want[path][1])  # type: ignore[arg-type]
            have[path] = want[path]
        elif os.path.lexists(top / path):  # not yet gone with a directory removed above
            if have[path][0] == "dir":
                shutil.rmtree(top / path)
            else:
                os.unlink(top / path)
        changed += 1
    for path in sorted(want):  # directories before their children
        if path in have and have[path] == want[path] and os.path.lexists(top / path):
            continue
        kind, *rest = want[path]
        target = top / path
        if kind == "dir":
            target.mkdir()
            os.chmod(target, rest[0])  # type: ignore[arg-type]
        elif kind == "link":
            os.symlink(rest[0], target)  # type: ignore[arg-type]
        else:
            target.write_bytes(rest[1])  # type: ignore[arg-type]
            os.chmod(target, rest[0])  # type: ignore[arg-type]
        changed += 1
    return changed


class NodePool:
    """Node trees per instance type for one test session; a tree is handed out only after reset_tree, and to one
    test at a time."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.healthy: Dict[str, Dict[str, Entry]] = {}
        self.free: Dict[str, List[Path]] = {}
        self.leased: List[Tuple[str, Path]] = []

    def lease(self, itype: str) -> FixtureNode:
        if itype not in self.healthy:
            self.healthy[itype] = _entries(NODES / f"{itype}-healthy")
        free = self.free.setdefault(itype, [])
        if free:
            base = free.pop()
            reset_tree(base, self.healthy[itype])
        else:
            base = self.directory / f"{itype}-node-{sum(1 for t, _ in self.leased if t == itype)}"
            shutil.copytree(NODES / f"{itype}-healthy", base, symlinks=True)
        self.leased.append((itype, base))
        return FixtureNode(base, itype)

    def give_back(self) -> None:
        for itype, base in self.leased:
            self.free[itype].append(base)
        self.leased.clear()


_POOL: Optional[NodePool] = None


@pytest.fixture(scope="session")
def _node_pool(tmp_path_factory) -> Iterator[NodePool]:
    global _POOL
    _POOL = NodePool(tmp_path_factory.mktemp("fixture-nodes"))
    yield _POOL
    _POOL = None


@pytest.fixture(autouse=True)
def _node_leases(_node_pool: NodePool) -> Iterator[None]:
    """The trees a test took go back to the pool when it ends (and are reset before the next test gets them)."""
    yield
    _node_pool.give_back()


def copy_node(tmp_path: Path, itype: str) -> FixtureNode:
    """A healthy node tree of type itype for this test alone (outside a test session: a copy under tmp_path)."""
    if _POOL is not None:
        return _POOL.lease(itype)
    dst = tmp_path / f"{itype}-node"
    shutil.copytree(NODES / f"{itype}-healthy", dst, symlinks=True)
    return FixtureNode(dst, itype)


@pytest.fixture(params=TYPES)
def any_node(request, tmp_path) -> FixtureNode:
    return copy_node(tmp_path, request.param)


@pytest.fixture
def p5(tmp_path) -> FixtureNode:
    return copy_node(tmp_path, "p5.48xlarge")


@pytest.fixture
def make_node(tmp_path):
    return lambda itype: copy_node(tmp_path, itype)


os.environ.setdefault("FMCLUSTER_TOOL_TIMEOUT", "5")
