"""Reading `vllm bench serve` output: the text block it prints ("Serving Benchmark Result") or the JSON it saves with
``--save-result``, in the keys of vllm/benchmarks/serve.py (docs/serving.md, "Load test and acceptance").

The text block is one ``label: value`` line each, labels padded to 40 columns (``"{:<40} {:<10.2f}"``), in sections
("Time to First Token", "Time per Output Token (excl. 1st token)", "Inter-token Latency", "End-to-end Latency", and with
--max-concurrency "Client-side Queueing"); releases differ in a few labels ("Total Token throughput" became "Total token
throughput"; "Failed requests", "Peak output token throughput" and "Peak concurrent requests" came later), so labels
are matched without case and lines the reader does not know are kept, not refused. The JSON's keys are
``completed``, ``failed``, ``request_throughput``, ``output_throughput``, ``total_token_throughput`` and, per latency
metric, ``mean_<m>_ms``, ``median_<m>_ms`` and ``p<percentile>_<m>_ms``. `fmcluster job serve` prints a marker line
before each run naming the deployment, and the saved JSON after it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

MARKER = "fmcluster-serve-load-test"  # job serve's line before a run: MARKER deployment=NAME key=value ...
JSON_MARKER = "fmcluster-serve-result-json"  # job serve's line before the saved JSON
HEADER = re.compile(r"^=+\s*Serving Benchmark Result\s*=+$")
FOOTER = re.compile(r"^=+$")
LINE = re.compile(r"^([^:]+?):\s+(\S+)\s*$")
PERCENTILE = re.compile(r"^(mean|median|p[0-9.]+)\s+(ttft|tpot|itl|e2el)\s+\(ms\)$")
# text label (lower case) -> the JSON key it carries
LABELS = {
    "successful requests": "completed",
    "failed requests": "failed",
    "benchmark duration (s)": "duration",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "request throughput (req/s)": "request_throughput",
    "request goodput (req/s)": "request_goodput",
    "output token throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "peak concurrent requests": "max_concurrent_requests",
    "total token throughput (tok/s)": "total_token_throughput",
    "maximum request concurrency": "max_concurrency",
    "request rate configured (rps)": "request_rate",
}


class OutputError(ValueError):
    """The text holds no serving benchmark result."""


@dataclass
class BenchResult:
    """One `vllm bench serve` run: its figures under the JSON keys, and what job serve's marker said."""

    values: Dict[str, float]
    deployment: Optional[str] = None
    marker: Dict[str, str] = field(default_factory=dict)
    source: str = "text"  # text | json
    unread: List[str] = field(default_factory=list)

    def get(self, key: str) -> Optional[float]:
        return self.values.get(key)


def looks_like(text: str) -> bool:
    """The text holds a serving benchmark (text block, marker or saved JSON), not an nccl-tests log."""
    head = text[:200000]
    return MARKER in head or "Serving Benchmark Result" in head or _json(text.strip()) is not None


def _json(text: str) -> Optional[Dict[str, object]]:
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "completed" in data else None


def _from_json(data: Dict[str, object]) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        out[k] = float(v)
    return out


def _block(lines: List[str]) -> BenchResult:
    values: Dict[str, float] = {}
    unread: List[str] = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("-") or FOOTER.match(line):
            continue
        m = LINE.match(line)
        if not m:
            unread.append(line)
            continue
        label, value = m.group(1).strip().lower(), m.group(2)
        try:
            number = float(value.replace(",", ""))
        except ValueError:
            if value.lower() in ("inf", "not"):  # "Request rate configured: inf", "concurrency: not set"
                continue
            unread.append(line)
            continue
        key = LABELS.get(label)
        if key is None:
            p = PERCENTILE.match(label)
            if p:
                stat, metric = p.groups()
                key = f"{stat}_{metric}_ms"
        if key is None:
            unread.append(line)
            continue
        values[key] = number
    return BenchResult(values, unread=unread)


def parse(text: str) -> List[BenchResult]:
    """Every run in `text`: a saved JSON alone, or job serve's log (marker, text block, saved JSON), or bare text
    blocks. A run's JSON, where printed, takes precedence over its text block (it has every percentile unrounded)."""
    whole = _json(text.strip())
    if whole is not None:
        return [BenchResult(_from_json(whole), source="json")]
    lines = text.splitlines()
    runs: List[BenchResult] = []
    marker: Dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith(MARKER):
            marker = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
            i += 1
            continue
        if HEADER.match(line):
            j = i + 1
            while j < len(lines) and not FOOTER.match(lines[j].strip()):
                j += 1
            run = _block(lines[i + 1:j])
            run.marker, run.deployment = dict(marker), marker.get("deployment")
            runs.append(run)
            i = j + 1
            continue
        if line == JSON_MARKER and runs and i + 1 < len(lines):
            data = _json(lines[i + 1].strip())  # serve.py writes the result as one line of JSON
            if data is not None:
                runs[-1].values.update(_from_json(data))
                runs[-1].source = "json"
        i += 1
    if not runs:
        raise OutputError("no 'Serving Benchmark Result' block and no saved result JSON (vllm bench serve "
                          "--save-result)")
    return runs
