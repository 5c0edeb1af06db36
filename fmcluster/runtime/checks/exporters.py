"""Layer 9: exporters — every exporter in the profile answers on its metrics endpoint."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from typing import Dict, List, Tuple

from .registry import Ctx, Result, bad, check, ok


def _fetch(url: str, timeout: float) -> Tuple[int, str]:
    req = urllib.request.Request(url, headers={"User-Agent": "fmcluster-validate"})  # noqa: S310 - http(s) only
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - profile allows http(s) only
        return resp.status, resp.read(8 << 20).decode("utf-8", errors="replace")


@check("exporters.http", "exporters", level="standard", applies=lambda p: bool(p.exporters),
       title="Exporters answer on their metrics endpoint")
def exporters(ctx: Ctx) -> Result:
    results: Dict[str, str] = {}
    timeout = max(0.5, min(ctx.node.tool_timeout, ctx.node.remaining() - 1, 10.0))

    def one(e: Dict[str, object]) -> None:
        name, url, expect = str(e.get("name", e["url"])), str(e["url"]), e.get("expect")
        try:
            status, body = _fetch(url, timeout)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            results[name] = f"no answer: {getattr(exc, 'reason', exc)}"
            return
        if status != 200:
            results[name] = f"HTTP {status}"
        elif expect and str(expect) not in body:
            results[name] = f"answers but has no {expect}"
        else:
            results[name] = "ok"

    threads: List[threading.Thread] = [threading.Thread(target=one, args=(e,), daemon=True) for e in ctx.profile.exporters]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout + 1
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    failing = []
    for e in ctx.profile.exporters:
        name = str(e.get("name", e["url"]))
        r = results.get(name, "no answer: timed out")
        if r != "ok" and e.get("required", True):
            failing.append(f"{name}: {r}")
    observed = ", ".join(f"{k}: {v}" for k, v in sorted(results.items())) or "no answer"
    if failing:
        return bad(observed, "every exporter answers", "start the exporter (systemctl/DaemonSet) and check its port",
                   "; ".join(failing))
    return ok(observed, "every exporter answers")
