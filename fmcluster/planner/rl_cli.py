"""`fmcluster plan SPEC --rl`: a reinforcement-learning step on each GPU node group (planner/rl.py): memory per GPU of
each role, colocated and at the best split, the time of each phase, the step, where it goes, the pick, and the
calibration band (docs/post-training.md, "Sizing a step")."""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List, Optional

from fmcluster.planner import rl
from fmcluster.planner.errors import PlanUsageError

DEFAULT_MODEL = "qwen2.5-0.5b"  # `fmcluster job rl`'s first model
TPS = (1, 2, 4, 8)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("post-training (--rl): one GRPO or PPO step; --model names the policy (default "
                                  f"{DEFAULT_MODEL}: the first job's)")
    g.add_argument("--rl", action="store_true", help="plan a reinforcement-learning step instead of pre-training")
    g.add_argument("--algorithm", default="grpo", choices=("grpo", "ppo"), help="grpo (no critic, default) or ppo")
    g.add_argument("--prompts", default="256", help="prompts per step (veRL data.train_batch_size; default 256)")
    g.add_argument("--group-size", default="8", help="responses per prompt (rollout.n; default 8)")
    g.add_argument("--prompt-length", default="512", help="mean prompt tokens (default 512)")
    g.add_argument("--rollout-length", default="1024", help="mean response tokens (default 1024)")
    g.add_argument("--max-rollout-length", help="the longest response allowed (default twice the mean)")
    g.add_argument("--rollout-tp", help="the rollout engine's tensor-parallel size (default: the fastest that fits)")


def _int(args: Any, name: str, default: Optional[int] = None) -> int:
    raw = getattr(args, name, None)
    if raw is None:
        if default is None:
            raise PlanUsageError(f"--{name.replace('_', '-')}: required")
        return default
    try:
        value = int(float(str(raw)))
    except ValueError:
        raise PlanUsageError(f"--{name.replace('_', '-')}: {raw!r} is not a number") from None
    if value < 1:
        raise PlanUsageError(f"--{name.replace('_', '-')}: must be at least 1")
    return value


def plan_group(group: Any, args: Any) -> Dict[str, Any]:
    model = rl.model(args.model or DEFAULT_MODEL)
    mean = _int(args, "rollout_length")
    gpus = rl.Gpus.of(group.instance, group.count * group.instance.gpus)
    base = rl.Job(model=model, samples=_int(args, "prompts") * _int(args, "group_size"),
                  prompt=_int(args, "prompt_length"), response_mean=mean,
                  response_max=_int(args, "max_rollout_length", 2 * mean), rollout_tp=1, algorithm=args.algorithm)
    if base.response_max < mean:
        raise PlanUsageError("--max-rollout-length: shorter than --rollout-length")
    tps = [_int(args, "rollout_tp")] if args.rollout_tp else [t for t in TPS if t <= gpus.per_node
                                                            and model.heads % t == 0]
    options = []
    for tp in tps:
        job = rl.Job(**{**base.__dict__, "rollout_tp": tp})
        step = rl.colocated(job, gpus)
        if step.step_s != float("inf"):
            options.append((step.step_s, tp, job, step))
    if not options:
        raise PlanUsageError(f"--rollout-tp: the rollout engine's weights fit no tensor-parallel size of {tps} on "
                             f"{gpus.name}")
    _, tp, job, colo = min(options, key=lambda o: (o[0], o[1]))
    split = min(rl.splits(job, gpus), key=lambda s: s.step_s, default=None)
    pick = colo if split is None or colo.step_s <= split.step_s else split
    mem = {"colocated": rl.memory_gib(job, gpus, gpus.count, "colocated")}
    if split is not None:
        mem["split"] = rl.memory_gib(job, gpus, split.train_gpus, "split")
    shares = {"rollout": pick.rollout_s, "training": pick.train_s, "weight sync": pick.sync_s}
    total = sum(shares.values())
    return {
        "group": group.name, "instance_type": group.instance_type, "gpus": gpus.count, "gpu": gpus.name,
        "model": model.name, "moe": model.is_moe, "algorithm": job.algorithm, "samples": job.samples,
        "prompt_length": job.prompt, "rollout_length": mean, "max_rollout_length": job.response_max, "rollout_tp": tp,
        "memory_gib_per_gpu": mem, "colocated": colo.summary(), "best_split": split.summary() if split else None,
        "pick": pick.summary(), "where": {k: round(v / total, 3) for k, v in shares.items()},
        "constants": {"tail": rl.TAIL, "train_share": rl.TRAIN_SHARE, "bw_share": rl.BW_SHARE,
                      "decode_share": rl.DECODE_SHARE},
        "band": band(),
    }


def band() -> Dict[str, Any]:
    rows = rl.calibration()
    dense = [r["error"] for r in rows if r["set"] == "dense"]
    moe = [r["error"] for r in rows if r["set"] == "moe"]
    return {"dense_runs": len(dense), "dense_error": [min(dense), max(dense)], "moe_runs": len(moe),
            "moe_error": [min(moe), max(moe)]}


def render(plans: List[Dict[str, Any]]) -> str:
    out: List[str] = []
    for p in plans:
        out += [f"RL step ({p['algorithm'].upper()}) of {p['model']} on node group {p['group']}: {p['gpus']} x {p['gpu']} "
                f"({p['instance_type']})",
                f"  {p['samples']} responses per step; prompt {p['prompt_length']}, response mean "
                f"{p['rollout_length']} (max {p['max_rollout_length']}); rollout tensor parallel {p['rollout_tp']}",
                "  memory per GPU (GiB)          " + "  ".join(f"{k:>10}" for k in p["memory_gib_per_gpu"])]
        keys = ("actor_states", "reference", "critic_states", "rollout_weights", "rollout_kv_cache")
        for k in keys:
            out.append(f"    {k.replace('_', ' '):26}" + "  ".join(f"{m[k]:>10}" for m in p["memory_gib_per_gpu"].values()))
        out.append("    fits                      " + "  ".join(f"{str(m['fits']):>10}"
                                                              for m in p["memory_gib_per_gpu"].values()))
        for m in p["memory_gib_per_gpu"].values():
            if m["note"]:
                out.append(f"    note: {m['note']}")
        out.append("  time (s)                         rollout     train      sync      step")
        rows = [("colocated", p["colocated"])] + ([(f"split {p['best_split']['rollout_gpus']}/"
                                                    f"{p['best_split']['train_gpus']} GPUs", p["best_split"])]
                                                  if p["best_split"] else [])
        for name, s in rows:
            out.append(f"    {name:28}{s['rollout_s']:>10}{s['train_s']:>10}{s['sync_s']:>10}{s['step_s']:>10}")
        w = p["where"]
        out.append(f"  pick: {p['pick']['mode']} ({p['pick']['step_s']} s a step); rollout {w['rollout']:.0%}, training "
                   f"{w['training']:.0%}, weight sync {w['weight sync']:.0%}")
        b = p["band"]
        out.append(f"  calibration: {b['dense_runs']} published dense runs within {b['dense_error'][0]:+.0%} .. "
                   f"{b['dense_error'][1]:+.0%} (docs/post-training.md)")
        if p["moe"]:
            out.append(f"  MoE: the {b['moe_runs']} published MoE runs took longer than predicted "
                       f"({b['moe_error'][0]:+.0%} .. {b['moe_error'][1]:+.0%}): read this step as a lower bound")
        out.append("")
    return "\n".join(out)


def run(args: Any) -> int:
    from fmcluster.registry import load_spec

    spec = load_spec(args.file)
    groups = [g for g in spec.node_groups if g.instance.is_gpu and (args.group is None or g.name == args.group)]
    if not groups:
        raise PlanUsageError(f"--group: no GPU node group {args.group!r}" if args.group else
                             "--rl: the spec has no GPU node group")
    plans = [plan_group(g, args) for g in groups]
    print(json.dumps(plans, indent=2) if args.json else render(plans))
    return 0
