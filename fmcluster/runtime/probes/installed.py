"""Installed versions of the stack: the driver's kernel module, CUDA, EFA installer, libfabric, aws-ofi-nccl, NCCL,
GDRCopy and torch, read from files (fast) and, for libfabric at the standard level, from fi_info."""

from __future__ import annotations

import json
import re
from typing import Dict, List, Optional

from .. import versions
from ..context import Ctx

OFI_LIB_GLOBS = (
    "/opt/amazon/ofi-nccl/lib*/libnccl-net*.so*",
    "/opt/aws-ofi-nccl/lib*/libnccl-net*.so*",
    "/usr/local/lib/libnccl-net*.so*",
)
NCCL_GLOBS = (
    "/usr/lib/x86_64-linux-gnu/libnccl.so.2.*", "/usr/lib/aarch64-linux-gnu/libnccl.so.2.*", "/usr/lib64/libnccl.so.2.*",
    "/usr/local/cuda*/lib64/libnccl.so.2.*", "/usr/local/cuda*/lib/libnccl.so.2.*", "/opt/nccl/build/lib/libnccl.so.2.*",
    "/usr/local/lib/libnccl.so.2.*",
)
SITE_GLOBS = (
    "/usr/lib/python3*/site-packages", "/usr/lib/python3/dist-packages", "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages", "/opt/conda/lib/python3*/site-packages",
    "/opt/conda/envs/*/lib/python3*/site-packages",
)
_OFI_VERSION = re.compile(rb"aws-ofi-nccl[ -]v?(\d+\.\d+\.\d+[\w.+-]*)")


def kernel_module_version(ctx: Ctx) -> Optional[str]:
    """Version of the loaded nvidia kernel module (/sys/module/nvidia/version, else /proc/driver/nvidia/version)."""
    v = ctx.node.read_or("/sys/module/nvidia/version")
    if v and v.strip():
        return v.strip()
    text = ctx.node.read_or("/proc/driver/nvidia/version") or ""
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


def _best(found: List[str]) -> Optional[str]:
    parsed = [(versions.parse(v), v) for v in found if versions.parse(v)]
    if not parsed:
        return None
    return max(parsed, key=lambda pv: pv[0] + (0,) * 8)[1]  # type: ignore[operator]


def efa_packages(ctx: Ctx) -> Optional[str]:
    return ctx.node.read_or("/opt/amazon/efa_installed_packages")


def ofi_libraries(ctx: Ctx) -> List[str]:
    libs: List[str] = []
    for g in OFI_LIB_GLOBS:
        libs.extend(ctx.node.glob(g))
    return libs


def site_packages(ctx: Ctx) -> List[str]:
    dirs: List[str] = []
    for g in SITE_GLOBS:
        dirs.extend(ctx.node.glob(g))
    return dirs


def file_versions(ctx: Ctx) -> Dict[str, Optional[str]]:
    """Versions found in files only (no commands): shared by every check that needs them."""
    def probe() -> Dict[str, Optional[str]]:
        v: Dict[str, Optional[str]] = {k: None for k in
                                       ("driver", "cuda", "efa_installer", "libfabric", "aws_ofi_nccl", "nccl",
                                        "gdrcopy", "torch", "torch_cuda")}
        node = ctx.node
        v["driver"] = kernel_module_version(ctx)
        cj = node.read_or("/usr/local/cuda/version.json")
        if cj:
            try:
                v["cuda"] = json.loads(cj)["cuda"]["version"]
            except (ValueError, KeyError, TypeError):
                v["cuda"] = None
        if v["cuda"] is None:
            m = re.search(r"CUDA Version (\d+\.\d+(?:\.\d+)?)", node.read_or("/usr/local/cuda/version.txt") or "")
            v["cuda"] = m.group(1) if m else None
        pk = efa_packages(ctx) or ""
        m = re.search(r"EFA installer version:\s*(\S+)", pk)
        v["efa_installer"] = m.group(1) if m else None
        m = re.search(r"\blibfabric1?(?:-aws)?[-_](\d+\.\d+\.\d+[\w.~]*)", pk)
        v["libfabric"] = m.group(1).replace("~", "") if m else None
        m = re.search(r"\b(?:aws-ofi-nccl|libnccl-ofi)[-_](\d+\.\d+\.\d+)", pk)
        ofi = m.group(1) if m else None
        if ofi is None:
            for lib in ofi_libraries(ctx):
                try:
                    with open(node.path(lib), "rb") as fh:
                        mm = _OFI_VERSION.search(fh.read(64 << 20))
                except OSError:
                    continue
                if mm:
                    ofi = mm.group(1).decode()
                    break
        v["aws_ofi_nccl"] = ofi
        nccl: List[str] = []
        for g in NCCL_GLOBS:
            nccl += [re.sub(r".*libnccl\.so\.", "", p) for p in node.glob(g)]
        sites = site_packages(ctx)
        for site in sites:
            nccl += [re.sub(r".*/nvidia_nccl_cu\d+-(.+)\.dist-info$", r"\1", p)
                     for p in node.glob(site + "/nvidia_nccl_cu*-*.dist-info")]
        v["nccl"] = _best([x for x in nccl if x.count(".") >= 2])
        gd = node.read_or("/sys/module/gdrdrv/version")
        v["gdrcopy"] = gd.strip() if gd and gd.strip() else None
        torches = []
        for site in sites:
            torches += [re.sub(r".*/torch-(.+)\.dist-info$", r"\1", p) for p in node.glob(site + "/torch-*.dist-info")]
        v["torch"] = _best(torches)
        if v["torch"]:
            m = re.search(r"\+cu(\d+?)(\d)$", v["torch"])
            v["torch_cuda"] = f"{m.group(1)}.{m.group(2)}" if m else None
        return v

    return ctx.memo("file_versions", probe)


def libfabric_version(ctx: Ctx) -> Optional[str]:
    """libfabric version: fi_info --version at standard level, else the EFA installer package list."""
    if ctx.at("standard"):
        res = ctx.node.run(("fi_info", "--version"))
        if res.ok:
            m = re.search(r"^libfabric:\s*(\S+)", res.stdout, re.M)
            if m:
                return m.group(1)
    return file_versions(ctx)["libfabric"]
