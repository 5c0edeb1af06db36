"""Where one step's time goes, as an inline SVG: one lane per resource (GPU compute, NVLink,
the inter-node network); the step bound is the longest lane, the serial sum all of them."""

from __future__ import annotations

from html import escape
from typing import Any, Dict, List, Tuple

from fmcluster.planner.figures import human_seconds, val

WIDTH, LEFT, LANE, GAP, TOP = 960, 130, 30, 12, 30
PALETTE = ["#1e88e5", "#5e35b1", "#8e24aa", "#00897b", "#6d4c41", "#ef6c00", "#c0ca33", "#d81b60"]
COMPUTE, BUBBLE = "#43a047", "#a5d6a7"
CHAR_PX = 6.5  # average width of an 11px DejaVu Sans character in chart units


def lanes(step: Dict[str, Any], internode: str) -> List[Tuple[str, List[Tuple[str, float, str]]]]:
    compute = [("compute", val(step["compute"]), COMPUTE)]
    if val(step["bubble"]):
        compute.append(("pipeline bubble", val(step["bubble"]), BUBBLE))
    nvl: List[Tuple[str, float, str]] = []
    net: List[Tuple[str, float, str]] = []
    for i, x in enumerate(step["collectives"]):
        color = PALETTE[i % len(PALETTE)]
        if x["nvlink_s"]:
            nvl.append((x["name"], x["nvlink_s"], color))
        if x["internode_s"]:
            net.append((x["name"], x["internode_s"], color))
    return [("GPU compute", compute), ("NVLink", nvl), (internode, net)]


def step_chart(step: Dict[str, Any], internode: str = "EFA") -> str:
    rows = lanes(step, internode)
    bound, serial = val(step["bound"]), val(step["serial"])
    scale = (WIDTH - LEFT - 20) / max(bound, 1e-12)
    height = TOP + len(rows) * (LANE + GAP) + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {height}" width="100%" '
           f'role="img" aria-label="step time by resource">',
           f'<text x="{LEFT}" y="18" class="axis">0</text>',
           f'<text x="{WIDTH - 20}" y="18" class="axis" text-anchor="end">step bound {escape(human_seconds(bound))} '
           f'(serial sum {escape(human_seconds(serial))})</text>']
    for i, (lane, segments) in enumerate(rows):
        y = TOP + i * (LANE + GAP)
        out.append(f'<text x="{LEFT - 8}" y="{y + LANE / 2 + 4}" text-anchor="end" class="lane">{escape(lane)}</text>')
        out.append(f'<rect x="{LEFT}" y="{y}" width="{WIDTH - LEFT - 20}" height="{LANE}" class="track"/>')
        x = float(LEFT)
        outside: List[str] = []
        for name, seconds, color in segments:
            w = max(seconds * scale, 2.0)
            tip = f"{name}: {human_seconds(seconds)}"
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{LANE}" fill="{color}"><title>{escape(tip)}'
                       '</title></rect>')
            if w > CHAR_PX * len(tip) + 12:
                out.append(f'<text x="{x + 6:.1f}" y="{y + LANE / 2 + 4}" class="seg">{escape(tip)}</text>')
            else:
                outside.append(tip)
            x += w
        room = (WIDTH - 20 - x - 6) / CHAR_PX
        if outside and room >= 12:  # too narrow to hold their label: name them after the lane's last segment
            text = "; ".join(outside)
            text = text if len(text) <= room else text[: int(room) - 1] + "…"
            out.append(f'<text x="{x + 6:.1f}" y="{y + LANE / 2 + 4}" class="out">{escape(text)}</text>')
        if not segments:
            out.append(f'<text x="{LEFT + 6}" y="{y + LANE / 2 + 4}" class="idle">idle</text>')
    bx = LEFT + bound * scale
    out.append(f'<line x1="{bx:.1f}" y1="{TOP - 6}" x2="{bx:.1f}" y2="{height - 18}" class="bound"/>')
    out.append("</svg>")
    return "\n".join(out)


def legend(step: Dict[str, Any], internode: str = "EFA") -> List[Tuple[str, str, str, float]]:
    """(color, name, lane, seconds) of every segment, for the table under the chart."""
    out: List[Tuple[str, str, str, float]] = []
    for lane, segments in lanes(step, internode):
        out.extend((color, name, lane, seconds) for name, seconds, color in segments)
    return out
