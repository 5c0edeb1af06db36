"""Near-ties are not a ranking: the layouts within the model's error band of the fastest, and which of them a
training lead would run.

The band is the calibration's: 80% of the published runs in data/calibration.json land within ERROR_BAND of the
estimate on their own layout (tests/planner/test_planner_calibration.py holds it). Two estimates each within e of the
truth can be in either order when they differ by less than (1 + e)/(1 - e), 1.35 at e = 15%: the model does not
tell such layouts apart, so the plan reports them as one tie group and picks the conventional one inside it:
- no context parallelism the sequence does not need (the smallest cp);
- the framework's usual sharding (Megatron's distributed optimizer or ZeRO-2-style optim_grads before
  Megatron-FSDP's full sharding; ZeRO-1/2 before ZeRO-3; FSDP2 without pipelining);
- no full recomputation where a layout in the group avoids it;
- the fewest pipeline stages;
- expert groups that stay on NVLink;
- tensor parallelism inside one NVLink domain (the enumeration allows nothing else) and no wider than needed;
- the framework's default schedule (fewest virtual stages);
- then the fastest. Each choice is said in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from fmcluster.planner.frameworks import framework
from fmcluster.planner.hardware import Hardware
from fmcluster.planner.search import Candidate, grows_batch

ERROR_BAND = 0.15  # the calibration's 80th-percentile error of the estimate on published layouts


@dataclass(frozen=True)
class TieGroup:
    members: List[Candidate]  # conventional order: members[0] is the pick
    fastest: Candidate
    band: float

    @property
    def pick(self) -> Candidate:
        return self.members[0]


def tie_ratio(band: float) -> float:
    """How far apart two estimates may be and still be in either order, each off by up to `band`."""
    return (1 + band) / (1 - band)


def conventional_key(c: Candidate, hw: Hardware) -> tuple:
    lay = c.layout
    ep_off_nvlink = lay.ep * (lay.tp if lay.expert_tp == lay.tp else 1) > hw.domain
    sharding = framework(c.framework).sharding_rank(c.memory.sharding)
    return (lay.cp, sharding, c.memory.recompute == "full", lay.pp, ep_off_nvlink, lay.tp, lay.vp, c.per_token_s)


def tie_group(cands: List[Candidate], hw: Hardware, requested_tokens: float,
              band: float = ERROR_BAND) -> Optional[TieGroup]:
    """Fitting layouts (those that keep the batch, when any does) within `band` of the fastest estimate per token."""
    fitting = [c for c in cands if c.fits]
    kept = [c for c in fitting if not grows_batch(c.layout, requested_tokens)] or fitting
    if not kept:
        return None
    fastest = min(kept, key=lambda c: c.per_token_s)
    members = [c for c in kept if c.per_token_s <= fastest.per_token_s * tie_ratio(band)]
    members.sort(key=lambda c: conventional_key(c, hw))
    return TieGroup(members, fastest, band)


def same_layout(a: Candidate, b: Candidate) -> bool:
    x, y = a.layout, b.layout
    return (x.tp, x.cp, x.pp, x.dp, x.ep, x.expert_tp) == (y.tp, y.cp, y.pp, y.dp, y.ep, y.expert_tp)


def why(group: TieGroup, hw: Hardware, seq: int) -> List[str]:
    """The pick's reasons, one per rule of conventional_key that set it apart from the rest of the group."""
    pick, others = group.pick, group.members[1:]
    lay, fw = pick.layout, framework(pick.framework)
    reasons = []
    if lay.cp == 1:
        reasons.append(f"no context parallelism at {seq:,} tokens" + (", which others in the group use"
                                                                      if any(o.layout.cp > 1 for o in others) else ""))
    else:
        reasons.append(f"context parallelism {lay.cp}, the least any layout in the group needs")
    fewer = [o for o in others if o.layout.cp == lay.cp and o.layout.pp < lay.pp]
    if any(fw.sharding_rank(o.memory.sharding) > fw.sharding_rank(pick.memory.sharding) for o in fewer):
        reasons.append(f"{fw.key}'s usual sharding, where fewer stages would need "
                       + ", ".join(sorted({o.memory.scheme.label for o in fewer
                                           if fw.sharding_rank(o.memory.sharding) > fw.sharding_rank(pick.memory.sharding)})))
    if pick.memory.recompute != "full" and any(o.memory.recompute == "full" for o in fewer):
        reasons.append("no full recomputation, which fewer stages would need")
    reasons.append("no pipeline parallelism" if lay.pp == 1 else f"{lay.pp} pipeline stages" + (
        ", the fewest that keep the above" if fewer else ", the fewest in the group"))
    if lay.tp > 1:
        reasons.append(f"tensor parallelism {lay.tp} inside one {hw.domain}-GPU NVLink domain")
    if lay.vp > 1:
        reasons.append(f"interleaved with {lay.vp} virtual stages ({fw.interleaving}; the default is "
                       f"{fw.default_schedule}, and interleaving is what shrinks this layout's bubble)")
    if pick.uneven:
        reasons.append(f"layers split unevenly over the stages ({fw.uneven_stages})")
    if group.fastest is not pick:
        gain = pick.per_token_s / group.fastest.per_token_s - 1
        reasons.append(f"the fastest, {group.fastest.layout.key()}, is {gain:.0%} faster by the estimate, which does "
                       f"not tell them apart (±{group.band:.0%} each)")
    return reasons


def summary(group: TieGroup, hw: Hardware, seq: int) -> Dict[str, Any]:
    return {"band": group.band, "size": len(group.members), "pick": group.pick.layout.key(),
            "fastest": group.fastest.layout.key(), "members": [c.layout.key() for c in group.members],
            "reasons": why(group, hw, seq),
            "band_source": "the calibration's band: 80% of its published runs lie within it of the estimate on "
                           "their own layout (docs/planning.md, Calibration)"}
