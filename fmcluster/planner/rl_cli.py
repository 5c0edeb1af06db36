"""`fmcluster plan SPEC --rl`: a reinforcement-learning step on each GPU node group (planner/rl.py): memory per GPU of
each role, colocated and at the best split, the time of each phase, the step, where it goes, the pick, and the
calibration band (docs/post-training.md, "Sizing a step")."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, Dict, List, Optional

from fmcluster.planner.errors import PlanUsageError

DEFAULT_MODEL = "qwen2.5-0.5b"  # `fmcluster job rl`'s first model
# The RL step's options and their defaults (None in the parser, so a pre-training plan can tell one was given).
DEFAULTS: Dict[str, Any] = {"algorithm": "grpo", "prompts": 256, "group_size": 8, "prompt_length": 512,
                            "rollout_length": 1024, "max_rollout_length": None, "rollout_tp": None}
# What `plan --rl` shares with a pre-training plan; every other option of `plan` plans pre-training only.
SHARED = {"file", "model", "group", "json", "force", "rl", "func", "command", "help"}
RL_OPTIONS = ", ".join(f"--{k.replace('_', '-')}" for k in DEFAULTS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The RL step's options. Called after every other option of `plan` is added: their defaults are kept, so that
    `plan --rl` refuses one given (it would be ignored) rather than plan without it."""
    training_only = {a.dest: (a.option_strings[-1], a.default) for a in parser._actions
                     if a.option_strings and a.dest not in SHARED}
    g = parser.add_argument_group("post-training (--rl): one GRPO or PPO step; --model names the policy (default "
                                  f"{DEFAULT_MODEL}: the first job's)")
    g.add_argument("--rl", action="store_true", help="plan a reinforcement-learning step instead of pre-training")
    g.add_argument("--algorithm", choices=("grpo", "ppo"), help="grpo (no critic, default) or ppo")
    g.add_argument("--prompts", help="prompts per step (veRL data.train_batch_size; default 256)")
    g.add_argument("--group-size", help="responses per prompt (rollout.n; default 8)")
    g.add_argument("--prompt-length", help="mean prompt tokens (default 512)")
    g.add_argument("--rollout-length", help="mean response tokens (default 1024)")
    g.add_argument("--max-rollout-length", help="the longest response allowed (default twice the mean)")
    g.add_argument("--rollout-tp", help="the rollout engine's tensor-parallel size (default: the fastest that fits "
                                        "in a node)")
    parser.set_defaults(rl_training_only=training_only)


def refuse_rl_options(args: Any) -> None:
    """A pre-training plan: an RL option given without --rl would be ignored; say so (exit 2)."""
    for name in DEFAULTS:
        if getattr(args, name, None) is not None:
            raise PlanUsageError(f"--{name.replace('_', '-')}: sizes an RL step; add --rl (or leave it out)")


def refuse_training_options(args: Any) -> None:
    """`plan --rl`: a pre-training option given would be ignored; say so (exit 2)."""
    for dest, (flag, default) in (getattr(args, "rl_training_only", None) or {}).items():
        if getattr(args, dest, default) != default:
            raise PlanUsageError(f"{flag}: plans pre-training and does nothing with --rl; an RL step takes --model, "
                                 f"--group, --json and {RL_OPTIONS}")


def _int(args: Any, name: str, default: Optional[int] = None) -> int:
    """--NAME as a whole number of at least 1 (suffixes K and M as in `plan`), else `default`."""
    from fmcluster.planner.models import parse_count

    option = f"--{name.replace('_', '-')}"
    raw = getattr(args, name, None)
    if raw is None:
        raw = DEFAULTS.get(name) if default is None else default
        if raw is None:
            raise PlanUsageError(f"{option}: required")
    try:
        value = parse_count(str(raw))
    except ValueError:
        raise PlanUsageError(f"{option}: {raw!r} is not a number; give a whole number of at least 1") from None
    if not math.isfinite(value) or value != int(value) or value < 1:
        raise PlanUsageError(f"{option}: {raw!r} is not a whole number of at least 1")
    return int(value)


def plan_group(group: Any, args: Any) -> Dict[str, Any]:
    from fmcluster.planner import rl  # only when --rl runs: plain `plan` never loads the RL model

    model = rl.model(args.model or DEFAULT_MODEL)
    mean = _int(args, "rollout_length")
    gpus = rl.Gpus.of(group.instance, group.count * group.instance.gpus)
    base = rl.Job(model=model, samples=_int(args, "prompts") * _int(args, "group_size"),
                  prompt=_int(args, "prompt_length"), response_mean=mean,
                  response_max=_int(args, "max_rollout_length", 2 * mean), rollout_tp=1,
                  algorithm=args.algorithm or DEFAULTS["algorithm"])
    if base.response_max < mean:
        raise PlanUsageError(f"--max-rollout-length: {base.response_max} is shorter than --rollout-length {mean}")
    if args.rollout_tp is not None:
        tps = [_int(args, "rollout_tp")]
        if tps[0] not in rl.rollout_tps(model, gpus.per_node, gpus.count):
            raise PlanUsageError(f"--rollout-tp: {tps[0]} on node group {group.name} is not "
                                 f"{rl.tp_rule(model, gpus.per_node, gpus.count)}")
    else:
        tps = rl.rollout_tps(model, gpus.per_node)
    options = []
    for tp in tps:
        job = rl.Job(**{**base.__dict__, "rollout_tp": tp})
        step = rl.colocated(job, gpus)
        if step.step_s != float("inf"):
            options.append((step.step_s, tp, job, step))
    if not options:
        weights = rl.weight_bytes(model) / rl.GIB
        said = (f"{model.name}'s weights ({weights:.0f} GiB in bf16) fit the rollout engine's share of a {gpus.name}'s "
                f"HBM at no tensor-parallel size of {tps}")
        if args.rollout_tp is not None:
            bigger = [str(t) for t in rl.rollout_tps(model, gpus.per_node, gpus.count) if t > tps[0]]
            raise PlanUsageError(f"--rollout-tp: {said}; " + (f"give a larger one: {', '.join(bigger)}" if bigger else
                                                              f"node group {group.name} is too small for it"))
        across = [str(t) for t in rl.rollout_tps(model, gpus.per_node, gpus.count) if t > gpus.per_node]
        raise PlanUsageError(f"--model: {said} within a node" + (
            f"; give --rollout-tp {' or '.join(across)} (across nodes: the plan has no term for tensor-parallel "
            "traffic between them)" if across else f"; node group {group.name} is too small for it"))
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
    from fmcluster.planner import rl  # only when --rl runs: plain `plan` never loads the RL model

    rows = rl.calibration()
    dense = [r["error"] for r in rows if r["set"] == "dense"]
    moe = [r["error"] for r in rows if r["set"] == "moe"]
    return {"dense_runs": len(dense), "dense_error": [min(dense), max(dense)], "leave_one_out": rl.LEAVE_ONE_OUT,
            "moe_runs": len(moe), "moe_error": [min(moe), max(moe)]}


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
                   f"{b['dense_error'][1]:+.0%} as fitted, about ±{b['leave_one_out']:.0%} on a run left out of the "
                   "fit (docs/post-training.md)")
        if p["moe"]:
            out.append(f"  MoE: the {b['moe_runs']} published MoE runs took longer than predicted "
                       f"({b['moe_error'][0]:+.0%} .. {b['moe_error'][1]:+.0%}): read this step as a lower bound")
        out.append("")
    return "\n".join(out)


def plan_groups(spec: Any, args: Any) -> List[Dict[str, Any]]:
    """The RL step on each GPU node group of the spec (or --group's)."""
    groups = [g for g in spec.node_groups if g.instance.is_gpu and (args.group is None or g.name == args.group)]
    if not groups:
        raise PlanUsageError(f"--group: no GPU node group {args.group!r}" if args.group else
                             "--rl: the spec has no GPU node group")
    return [plan_group(g, args) for g in groups]


def run(args: Any) -> int:
    from fmcluster.registry import load_spec

    refuse_training_options(args)
    plans = plan_groups(load_spec(args.file), args)
    print(json.dumps(plans, indent=2) if args.json else render(plans))
    return 0
