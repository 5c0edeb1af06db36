"""Version parsing and the compatibility rules between the layers of the stack."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

Version = Tuple[int, ...]

_NUM = re.compile(r"(\d+(?:\.\d+)*)")


def parse(text: Optional[str]) -> Optional[Version]:
    """'2.6.0amzn1.0' -> (2, 6, 0); '1.13.2-aws' -> (1, 13, 2); '2.9.0+cu130' -> (2, 9, 0); None when no number."""
    if not text:
        return None
    m = _NUM.search(str(text))
    if not m:
        return None
    return tuple(int(p) for p in m.group(1).split("."))


def cmp(a: Version, b: Version) -> int:
    n = max(len(a), len(b))
    pa, pb = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (pa > pb) - (pa < pb)


def at_least(have: Optional[str], want: Optional[str]) -> bool:
    h, w = parse(have), parse(want)
    if h is None or w is None:
        return False
    return cmp(h, w) >= 0


def same(have: Optional[str], want: Optional[str]) -> bool:
    """Pinned match: every component given in want must equal have's (want '2.6' matches '2.6.0amzn1.0')."""
    h, w = parse(have), parse(want)
    if h is None or w is None:
        return False
    return h[: len(w)] == w


# CUDA major -> minimum driver (NVIDIA CUDA compatibility: minor-version compatibility within a major).
CUDA_MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def cuda_driver_ok(cuda: str, driver: str) -> Tuple[bool, str]:
    c = parse(cuda)
    if c is None:
        return False, f"cannot parse CUDA version {cuda!r}"
    need = CUDA_MIN_DRIVER.get(c[0])
    if need is None:
        return True, f"no rule for CUDA {c[0]}.x"
    return at_least(driver, need), f"CUDA {cuda} needs driver >= {need}"


def compatibility_problems(v: Dict[str, Optional[str]], family: str = "") -> List[str]:
    """Known-bad combinations (docs/validation.md lists each with its source).
    v keys: aws_ofi_nccl, libfabric, efa_installer, nccl, cuda."""
    problems: List[str] = []
    ofi, lf, efa, nccl, cuda = (v.get(k) for k in ("aws_ofi_nccl", "libfabric", "efa_installer", "nccl", "cuda"))
    if ofi and lf and at_least(ofi, "1.13") and not at_least(lf, "1.22"):
        problems.append(f"aws-ofi-nccl {ofi} needs libfabric >= 1.22 (have {lf})")
    if ofi and efa:
        o = parse(ofi)
        if o is not None and o[:2] in ((1, 11), (1, 12)) and at_least(efa, "1.35"):
            problems.append(f"aws-ofi-nccl {ofi} is known bad with EFA installer >= 1.35 (have {efa})")
    if nccl and efa and at_least(nccl, "2.19") and not at_least(efa, "1.29"):
        problems.append(f"NCCL {nccl} needs EFA installer >= 1.29 (have {efa}; else set FI_EFA_SET_CUDA_SYNC_MEMOPS=0)")
    # per-type floors (CUDA, NCCL, aws-ofi-nccl for p5, ...) are the catalog's min_versions, judged by each check
    return problems
