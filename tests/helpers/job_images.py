"""Stand-ins for each kind's default node image, as far as its public sources describe what the first job needs of it,
and a run of the job's preparation (`NCCL_PREPARE_ONLY=1`) against one: the written-out job (an sbatch script, a
hostfile script, or the script inside a Kubernetes MPIJob with its launcher's environment) runs under bash with
`FMCLUSTER_IMAGE_ROOT` standing in for the node's /, and fake curl, make and nvidia-smi where it builds.

What each image holds (docs/validation.md, "Each orchestrator's default AMI"; docs/observability.md, "Fabric
acceptance"):

- the Deep Learning AMI (none, pcs' image built from it): several CUDA toolkits, each with nccl-tests built under
  <cuda>/efa/test-cuda-<v> and the NCCL they link in <cuda>/lib; the EFA installer's Open MPI and aws-ofi-nccl;
- the HyperPod Slurm AMI: CUDA 12.6-13.0 (/usr/local/cuda one of them), the EFA installer; no NCCL or nccl-tests
  published;
- the official ParallelCluster AMI: one CUDA toolkit, the EFA installer (Open MPI, aws-ofi-nccl); no NCCL;
- AWS's nccl-tests container image (eks, hyperpod-eks): nccl-tests under /opt/nccl-tests/build, the EFA installer.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import yaml

TESTS = ("all_reduce_perf", "alltoall_perf")
EFA = {"opt/amazon/openmpi/bin/mpirun": "x", "opt/amazon/openmpi/include/mpi.h": "", "opt/amazon/openmpi/lib/": "",
       "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so": ""}


def _tests(directory: str) -> Dict[str, str]:
    return {f"{directory}/{t}": "x" for t in TESTS}


# kind -> files of its image ("x": executable; a name ending in / is a directory)
IMAGES: Dict[str, Dict[str, str]] = {
    "dlami": {**EFA, **_tests("usr/local/cuda-12.9/efa/test-cuda-12.9"), **_tests("usr/local/cuda-13.2/efa/test-cuda-13.2"),
              "usr/local/cuda-12.9/lib/libnccl.so.2": "", "usr/local/cuda-13.2/lib/libnccl.so.2": "",
              "usr/local/cuda-13.2/bin/nvcc": "x"},
    "hyperpod-slurm": {**EFA, **{f"usr/local/cuda-{v}/bin/nvcc": "x" for v in ("12.6", "12.8", "12.9", "13.0")},
                       "usr/local/cuda/bin/nvcc": "x"},
    "parallelcluster": {**EFA, "usr/local/cuda/bin/nvcc": "x", "usr/local/cuda-13.2/bin/nvcc": "x"},
    "container": {**EFA, **_tests("opt/nccl-tests/build")},
}
IMAGE_OF_KIND = {"none": "dlami", "pcs": "dlami", "hyperpod-slurm": "hyperpod-slurm",
                 "parallelcluster": "parallelcluster", "eks": "container", "hyperpod-eks": "container"}

# A fake build: curl hands out the archives FAKE_SOURCES holds, make writes what NCCL's and nccl-tests' builds write,
# nvidia-smi reports Hopper GPUs; each call is logged.
FAKE_COMMANDS = {
    "curl": """out=""; url=""
while [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift ;; https://*) url="$1" ;; esac; shift; done
echo "curl $url" >> "$FAKE_LOG"
case "$url" in */NVIDIA/nccl-tests/*) cp "$FAKE_SOURCES/nccl-tests.tar.gz" "$out" ;;
               */NVIDIA/nccl/*) cp "$FAKE_SOURCES/nccl.tar.gz" "$out" ;; *) exit 22 ;; esac""",
    "make": """echo "make $*" >> "$FAKE_LOG"
[ -n "${FAKE_MAKE_RC:-}" ] && exit "$FAKE_MAKE_RC"
dir=""; while [ $# -gt 0 ]; do [ "$1" = -C ] && dir="$2"; shift; done
case "$dir" in */nccl-tests) mkdir -p "$dir/build"; for t in all_reduce_perf alltoall_perf; do
                               printf '#!/bin/sh\\n' > "$dir/build/$t"; chmod +x "$dir/build/$t"; done ;;
               */nccl) mkdir -p "$dir/build/lib"; : > "$dir/build/lib/libnccl.so.2" ;; esac""",
    "nvidia-smi": 'echo "nvidia-smi $*" >> "$FAKE_LOG"; echo "9.0"',
}


def image(root: Path, kind: str) -> Path:
    """`root` made into the stand-in of `kind`'s image."""
    for rel, mode in IMAGES[IMAGE_OF_KIND[kind]].items():
        path = root / rel
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n" if mode == "x" else "")
        if mode == "x":
            path.chmod(0o755)
    return root


def fake_commands(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in FAKE_COMMANDS.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body + "\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def archive(path: Path, top: str, files: Dict[str, bytes], extra: Optional[tarfile.TarInfo] = None) -> bytes:
    """A gzipped tar of `files` below the directory `top` (as GitHub's archive of a commit), written to `path`;
    returns nothing useful but the bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
        if extra is not None:
            tar.addfile(extra, io.BytesIO(b"x" * extra.size))
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


def source_digest(files: Dict[str, bytes]) -> str:
    """The pin's definition: sha256 of the sorted "f <x|-> <sha256> <path>" lines of the source's files."""
    lines = sorted((name, f"f {'x' if name.endswith('.sh') else '-'} {hashlib.sha256(data).hexdigest()} {name}\n")
                   for name, data in files.items())
    return hashlib.sha256("".join(line for _, line in lines).encode()).hexdigest()


NCCL_SOURCE = {"Makefile": b"all:\n", "src/init.cc": b"// nccl\n", "src/device/generate.sh": b"#!/bin/sh\n"}
TESTS_SOURCE = {"Makefile": b"all:\n", "src/all_reduce.cu": b"// tests\n"}


def sources(directory: Path) -> Dict[str, str]:
    """Stand-in archives of NCCL and nccl-tests in `directory`, and the pins that match them."""
    directory.mkdir(parents=True, exist_ok=True)
    archive(directory / "nccl.tar.gz", "nccl-0000", NCCL_SOURCE)
    archive(directory / "nccl-tests.tar.gz", "nccl-tests-0000", TESTS_SOURCE)
    return {"NCCL_SOURCE_SHA256": source_digest(NCCL_SOURCE), "NCCL_TESTS_SOURCE_SHA256": source_digest(TESTS_SOURCE)}


def with_pins(script: str, pins: Dict[str, str]) -> str:
    """The script with its source pins replaced (the stand-in sources are not NCCL's)."""
    lines = script.splitlines(True)
    for i, line in enumerate(lines):
        for key, value in pins.items():
            if line.startswith(f"{key}="):
                lines[i] = f"{key}={value}\n"
    return "".join(lines)


def script_and_env(job: str) -> Tuple[str, Dict[str, str]]:
    """The script a written-out job runs and the environment it gets: an sbatch or hostfile script as it is; a
    Kubernetes job's ConfigMap script with its launcher container's environment."""
    if job.startswith("#!"):
        return job, {}
    docs = {d["kind"]: d for d in yaml.safe_load_all(job)}
    launcher = docs["MPIJob"]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    return docs["ConfigMap"]["data"]["nccl-tests.sh"], {e["name"]: e["value"] for e in launcher.get("env", [])}


@dataclass
class Prepared:
    rc: int
    stdout: str
    stderr: str
    calls: List[str]

    @property
    def tests_dir(self) -> str:
        return next(line.split(": ", 1)[1] for line in self.stdout.splitlines() if line.startswith("nccl-tests: "))

    @property
    def library_path(self) -> List[str]:
        line = next(x for x in self.stdout.splitlines() if x.startswith("LD_LIBRARY_PATH: "))
        return [p for p in line.split(": ", 1)[1].split(":") if p]


def prepare(job: str, kind: str, tmp: Path, *, env: Optional[Dict[str, str]] = None,
            pins: Optional[Dict[str, str]] = None, root: Optional[Path] = None) -> Prepared:
    """Run the written-out `job`'s preparation on a stand-in of `kind`'s image under `tmp` (made once per `tmp`)."""
    root = root or tmp / "image"
    if not root.exists():
        image(root, kind)
    bin_dir = fake_commands(tmp / "bin")
    script, job_env = script_and_env(job)
    path = tmp / "job.sh"
    path.write_text(with_pins(script, pins or sources(tmp / "sources")))
    # HOME is the node's (below the stand-in root, as every node path)
    full = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": "/home/ml", "FMCLUSTER_IMAGE_ROOT": str(root),
            "NCCL_PREPARE_ONLY": "1", "FAKE_LOG": str(tmp / "calls.log"), "FAKE_SOURCES": str(tmp / "sources"),
            **job_env, **(env or {})}
    r = subprocess.run(["bash", str(path)], env=full, capture_output=True, text=True, timeout=120)
    log = tmp / "calls.log"
    calls = log.read_text().splitlines() if log.exists() else []
    return Prepared(r.returncode, r.stdout, r.stderr, calls)
