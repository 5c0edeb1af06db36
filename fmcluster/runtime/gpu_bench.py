"""Per-GPU BF16 GEMM throughput and HBM bandwidth, printed as JSON. Needs PyTorch; run by the deep level:

    <python with torch> gpu_bench.py [--seconds S]

Output: {"gpus": [{"index": 0, "name": "...", "bf16_tflops": 700.1, "hbm_tbps": 3.0}, ...]}
Kept free of fmcluster imports so any interpreter with torch can run it by path.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _time(fn, torch, dev, seconds: float) -> float:  # type: ignore[no-untyped-def]
    fn()
    torch.cuda.synchronize(dev)
    n, start = 0, time.perf_counter()
    while True:
        for _ in range(5):
            fn()
        n += 5
        torch.cuda.synchronize(dev)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / n


def measure(index: int, seconds: float) -> dict:  # type: ignore[type-arg]
    import torch  # noqa: PLC0415 - only on the deep path

    dev = torch.device("cuda", index)
    torch.cuda.set_device(dev)
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    t = _time(lambda: torch.matmul(a, b), torch, dev, seconds)
    tflops = 2 * n**3 / t / 1e12
    numel = (2 << 30) // 4  # 2 GiB of float32
    src = torch.empty(numel, device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)
    t = _time(lambda: dst.copy_(src), torch, dev, seconds)
    tbps = 2 * numel * 4 / t / 1e12  # read + write
    torch.cuda.empty_cache()
    return {"index": index, "name": torch.cuda.get_device_name(dev), "bf16_tflops": round(tflops, 1),
            "hbm_tbps": round(tbps, 3)}


def main(argv=None) -> int:  # type: ignore[no-untyped-def]
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: PLC0415
    except ImportError as exc:
        print(json.dumps({"error": f"torch not importable: {exc}"}))
        return 3
    if not torch.cuda.is_available():
        print(json.dumps({"error": "torch.cuda.is_available() is False"}))
        return 3
    gpus = [measure(i, args.seconds) for i in range(torch.cuda.device_count())]
    print(json.dumps({"gpus": gpus}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
