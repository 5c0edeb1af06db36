"""`fmcluster job rl SPEC` and `fmcluster job sft SPEC`: the post-training jobs, written for the spec's cluster
(docs/post-training.md). Kubernetes kinds get a RayJob (rl) or an indexed Job (sft) through the cluster's queue,
placed where the kind says (`OrchestratorKind.job_placement`); Slurm kinds an sbatch script that starts Ray inside the
allocation (rl) or one `trl sft` per node (sft); a cluster without a scheduler the same over SSH from a host file."""

from __future__ import annotations

import argparse
import re
from typing import Any, Dict, List, Optional, Tuple

import yaml

from fmcluster.cli.errors import EXIT_OK, UsageError

RL_JOB, SFT_JOB = "verl-grpo", "trl-sft"
HOURS = 24  # the Slurm time limit of a first run


def gpu_group(spec: Any, name: Optional[str]) -> Any:
    if name is not None and name not in {g.name for g in spec.node_groups}:
        raise UsageError(f"--group: no node group {name!r}; the spec has {', '.join(g.name for g in spec.node_groups)}")
    groups = [g for g in spec.node_groups if g.instance.is_gpu and (name is None or g.name == name)]
    if not groups:
        gpu = [g.name for g in spec.node_groups if g.instance.is_gpu]
        which = f"node group {name} has no GPUs" if name else "the spec has no GPU node group"
        raise UsageError(f"--group: {which}; the job needs one" + (f" ({', '.join(gpu)})" if gpu else ""))
    return groups[0]


# A Hugging Face repository id (huggingface_hub's validate_repo_id): a name, or owner/name, of letters, digits, '-',
# '_' and '.', at most 96 characters, no '--' or '..'. Held here so the id is safe in a path, a shell word and a
# Hydra override, and a typo stops before the queue wait rather than at the download.
HF_ID = re.compile(r"(?!.*(--|\.\.))[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")
# A container image reference (registry/path:tag or @sha256:digest), in the characters Docker's reference grammar
# allows (distribution/reference): nothing a shell or YAML reads otherwise.
IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]*(@sha256:[0-9a-f]{64})?")


def hf_id(value: Optional[str], option: str, default: str) -> str:
    if value is None:
        return default
    if len(value) > 96 or not HF_ID.fullmatch(value) or value.endswith((".", "-")):
        raise UsageError(f"{option}: {value!r} is not a Hugging Face id: owner/name (or name) of letters, digits, '-', "
                         "'_' and '.', at most 96 characters, no '--' or '..' (e.g. Qwen/Qwen2.5-7B-Instruct)")
    return value


def image_ref(value: Optional[str], default: str) -> str:
    if value is None:
        return default
    if len(value) > 255 or not IMAGE_REF.fullmatch(value) or value.endswith((":", "/")):
        raise UsageError(f"--image: {value!r} is not an image reference: [registry/]repository[:tag][@sha256:digest] "
                         "of letters, digits, '.', '_', '-', '/' and ':'")
    return value


def shared_root(spec: Any) -> str:
    from fmcluster.cli.shared_storage import file_system_key

    found = spec.storage.file_system()
    if found is None:
        raise UsageError(f"{file_system_key(spec)}: the post-training jobs keep the model, the data and the checkpoints "
                         "on the shared file system every node mounts; the spec has none")
    return str(found[1].mount_point)


def checkpoint_root(spec: Any, mount: str) -> Tuple[str, str]:
    """Where the jobs checkpoint, and a line saying why: the spec's checkpoint directory on the shared file system
    (veRL and TRL write shards from every rank to one shared directory; a tier that copies from node-local disks or
    lives elsewhere is not theirs to use)."""
    from fmcluster.cli.shared_storage import file_system
    from fmcluster.spec.checkpoints import paths
    from fmcluster.spec.storage import nested

    c, where = spec.checkpoints, paths(spec)
    if c is None or where is None:
        return f"{mount}/checkpoints", f"checkpoints under {mount}/checkpoints (the spec has no checkpoints section)"
    shared = nested(where.durable, mount)  # the tier's directory every node restores from is on the file system
    root = where.durable if shared else f"{mount}/checkpoints"
    if shared and where.local is None:
        return root, f"checkpoints under {root} (checkpoints.tier {c.tier})"
    found = file_system(spec)
    on = (found[0].short_title or found[0].title) if found is not None else "the shared file system"
    return root, (f"checkpoints under {root} on {on}: checkpoints.tier {c.tier} needs the "
                  "training code's own support, which veRL and TRL do not have (docs/post-training.md)")


def place(spec: Any, group: Any) -> Any:
    """The kind's placement of the job's GPU pods (None: Slurm or hosts), with the shared file system's claim."""
    import dataclasses

    from fmcluster.registry import kind_of

    try:
        placement = kind_of(spec).job_placement(spec, group)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return None if placement is None else dataclasses.replace(placement, claim=spec.storage.file_system()[1].claim)


def _nodes(args: argparse.Namespace, most: int, group: Any) -> int:
    nodes = most if args.nodes is None else args.nodes
    if not 1 <= nodes <= most:
        raise UsageError(f"--nodes: {nodes} is not between 1 and the {most} nodes the job may take on {group.name}")
    return nodes


def _rollout_tp(args: argparse.Namespace, model: str, gpus: int) -> Optional[int]:
    """--rollout-tp, held to what the engine can run: a replica within one node (dividing its GPUs) and, for a
    model the planner knows, splitting its attention heads (planner/rl.py rollout_tps). None: the plan's."""
    tp = args.rollout_tp
    if tp is None:
        return None
    from fmcluster.planner import rl

    name = rl.preset_for(model)
    if name is not None:
        m = rl.model(name)
        if tp not in rl.rollout_tps(m, gpus):
            raise UsageError(f"--rollout-tp: {tp} is not {rl.tp_rule(m, gpus)}")
    elif not (1 <= tp <= gpus and gpus % tp == 0):
        allowed = ", ".join(str(t) for t in range(1, gpus + 1) if gpus % t == 0)
        raise UsageError(f"--rollout-tp: {tp} is not one of {allowed} (dividing the node's {gpus} GPUs: a replica "
                         "within one node); it must also divide the model's attention heads")
    return tp


def _dump(header: List[str], objects: List[Dict[str, Any]]) -> str:
    body = yaml.safe_dump_all(objects, sort_keys=False, width=100000)
    return "".join(f"# {line}\n" if line else "#\n" for line in header) + body


def render_rl(spec: Any, args: argparse.Namespace, spec_file: str) -> str:
    from fmcluster.posttraining import scripts, verl

    group = gpu_group(spec, args.group)
    mount = shared_root(spec)
    placement = place(spec, group)
    nodes = _nodes(args, placement.nodes if placement else group.count, group)
    gpus = group.instance.gpus
    model = hf_id(args.model, "--model", verl.MODEL)
    image = image_ref(args.image, verl.IMAGE)
    tp = _rollout_tp(args, model, gpus)
    root, where = checkpoint_root(spec, mount)
    keep = spec.checkpoints.keep if spec.checkpoints else 3
    run = verl.GrpoRun(name=RL_JOB, model=model, model_dir=f"{mount}/posttraining/models/{model}",
                       data_dir=f"{mount}/posttraining/data/gsm8k", checkpoint_dir=f"{root}/{RL_JOB}", nodes=nodes,
                       gpus_per_node=gpus, rollout_tp=tp or 1, keep=keep)
    sized = size_from_plan(spec, group, run, explicit_tp=tp)
    run, sizing = sized if sized else (run, "no plan for this model (not a preset): rollout tensor parallel "
                                            f"{run.rollout_tp}, a checkpoint every {run.save_freq} steps")
    header = [
        f"Generated by `fmcluster job rl {spec_file}`: veRL {verl.VERSION} GRPO on {nodes} x {group.instance_type} of "
        f"node group {group.name} ({nodes * gpus} GPUs), {model} on GSM8K,",
        f"rollout {verl.ROLLOUT} (tensor parallel {run.rollout_tp}) colocated with FSDP2 training; {where}.",
        f"Sizes: {sizing}.",
        "Model and data are fetched once to the shared file system (the nodes need HTTPS out); a restart resumes from",
        "the newest checkpoint (trainer.resume_mode auto).",
        f"Image {image} (veRL's image for its 0.6 releases; each Ray node installs the veRL wheel at start).",
        "Between nodes NCCL needs EFA in the image: build veRL's docker/aws/Dockerfile.extention.awsefa (v0.6.0) into",
        "your registry and pass it as --image. Scale up: --model (a Hugging Face id), --nodes, --rollout-tp (",
        "`fmcluster plan --rl` sizes them); docs/post-training.md.",
    ]
    if placement is not None:
        return _rl_manifest(header, spec, group, placement, run, image, mount)
    prepare, train = verl.prepare_lines(run), verl.train_line(run)
    if spec.orchestrator_kind.nodes.agent == "slurm":
        header += ["", f"Run: sbatch <this file>; the log ({RL_JOB}_<jobid>.out) names the head node and its address.",
                   *scripts.dashboard_lines(slurm=True)]
        sbatch = scripts.sbatch_header(job=RL_JOB, partition=group.name, nodes=nodes, minutes=HOURS * 60, requeue=True)
        return scripts.ray_slurm(header=header, sbatch=sbatch, image=image, mount=mount, gpus=gpus,
                                 install=verl.install_line(), prepare=prepare, train=train)
    header += ["", "Run: HOSTFILE=hosts bash <this file>   (hosts: the nodes, one a line, the first Ray's head; "
               "passwordless SSH between them)", *scripts.dashboard_lines(slurm=False)]
    return scripts.ray_hosts(header=header, image=image, mount=mount, gpus=gpus, nodes=nodes,
                             rerun=f"fmcluster job rl {spec_file}", install=verl.install_line(), prepare=prepare,
                             train=train)


def size_from_plan(spec: Any, group: Any, run: Any, explicit_tp: Optional[int]) -> Optional[Tuple[Any, str]]:
    """The rollout's tensor-parallel size and the checkpoint interval in steps from `plan --rl` (planner/rl.py) for
    the run's batch on its nodes, where the model is a preset; None where it is not."""
    import dataclasses
    import math

    from fmcluster.planner import rl

    name = rl.preset_for(run.model)
    if name is None:
        return None
    model = rl.model(name)
    gpus = rl.Gpus.of(group.instance, run.nodes * run.gpus_per_node)
    best = None
    tps = [explicit_tp] if explicit_tp else rl.rollout_tps(model, run.gpus_per_node)
    for tp in tps:
        job = rl.Job(model=model, samples=run.prompts * run.group, prompt=run.prompt_length,
                     response_mean=run.response_length / 2, response_max=run.response_length, rollout_tp=tp)
        step = rl.colocated(job, gpus).step_s
        if best is None or step < best[0]:
            best = (step, tp)
    if best is None or best[0] == math.inf:  # the rollout's weight shard fits no engine: the job could not start
        option = "--rollout-tp" if explicit_tp else "--model"
        raise UsageError(f"{option}: `fmcluster plan --rl --model {name}` fits {name}'s weights in the rollout engine's "
                         f"share of a {gpus.name} at no tensor-parallel size of {tps} within a node; give more GPUs "
                         "per node or a smaller model")
    step, tp = best
    minutes = spec.checkpoints.interval_minutes if spec.checkpoints else 30
    save = max(1, min(int(minutes * 60 // step), run.steps_per_epoch))
    said = (f"`fmcluster plan --rl --model {name}` puts a step near {step:.0f} s with rollout tensor parallel {tp} "
            f"(a response mean of half the maximum), so a checkpoint every {save} steps (checkpoints.interval_minutes "
            f"{minutes} at that pace, at most an epoch of {run.steps_per_epoch} steps)")
    return dataclasses.replace(run, rollout_tp=tp, save_freq=save), said


def _rl_manifest(header: List[str], spec: Any, group: Any, placement: Any, run: Any, image: str, mount: str) -> str:
    from fmcluster.platforms.kubernetes import job_placement, kuberay
    from fmcluster.posttraining import verl

    container = {"name": "ray", "image": image, "args": [verl.install_line()],
                 "env": [{"name": "HF_HOME", "value": f"{mount}/posttraining/hf"}]}
    head = job_placement.gpu_pod(group, placement, container=container, mount_point=mount,
                                 reserve_cpu_cores=kuberay.SIDECAR_SUBMITTER_CPU_CORES)
    worker = job_placement.gpu_pod(group, placement, container=container, mount_point=mount)
    job = kuberay.ray_job(name=RL_JOB, namespace=placement.namespace, labels=placement.labels,
                          entrypoint=verl.entrypoint(run), head=head, workers=[("gpu", run.nodes - 1, worker)],
                          gpus_per_node=run.gpus_per_node, backoff_limit=2,
                          runtime_env_yaml=yaml.safe_dump({"env_vars": dict(verl.RUNTIME_ENV)}, sort_keys=False))
    header = header + [*placement.notes, "",
                       f"A RayJob admitted whole through {placement.labels.get('kueue.x-k8s.io/queue-name')} in "
                       f"namespace {placement.namespace}; the KubeRay operator is installed by the cluster stack.",
                       "  kubectl apply -f <this file>",
                       f"  kubectl -n {placement.namespace} get rayjob {RL_JOB} -w",
                       "Ray's dashboard and job API, through the Kubernetes API:",
                       *kuberay.dashboard_lines(placement.namespace, RL_JOB)]
    return _dump(header, [job])


def render_sft(spec: Any, args: argparse.Namespace, spec_file: str) -> str:
    from fmcluster.posttraining import scripts, trl

    group = gpu_group(spec, args.group)
    mount = shared_root(spec)
    placement = place(spec, group)
    nodes = _nodes(args, placement.nodes if placement else group.count, group)
    gpus = group.instance.gpus
    root, where = checkpoint_root(spec, mount)
    model = hf_id(args.model, "--model", trl.MODEL)
    dataset = hf_id(args.dataset, "--dataset", trl.DATASET)
    image = image_ref(args.image, trl.IMAGE)
    values = trl.config(model=model, dataset=dataset, output_dir=f"{root}/{SFT_JOB}",
                        save_steps=500, keep=spec.checkpoints.keep if spec.checkpoints else 3)
    header = [
        f"Generated by `fmcluster job sft {spec_file}`: TRL {trl.VERSION} supervised fine-tuning on {nodes} x "
        f"{group.instance_type} of node group {group.name}, {model} on {values['dataset_name']},",
        f"FSDP2 through accelerate (TRL's fsdp2 profile), {nodes * gpus} processes; {where}.",
        f"Image {image} (the base of TRL's own Dockerfile; each node installs TRL {trl.VERSION} at start).",
        "Scale up: --model, --dataset, --nodes; docs/post-training.md.",
    ]
    config_text = trl.config_yaml(values)
    if placement is None and spec.orchestrator_kind.nodes.agent != "slurm":
        launch = trl.launch(config_path=f"{mount}/posttraining/{SFT_JOB}.yaml", nodes=nodes, gpus_per_node=gpus,
                            rank="$rank", head="$head_ip")
        return scripts.sft_hosts(
            header=header + ["", "Run: HOSTFILE=hosts bash <this file>   (hosts: the nodes, one a line, the first the "
                             "rendezvous; passwordless SSH between them)"],
            image=image, mount=mount, nodes=nodes, rerun=f"fmcluster job sft {spec_file}", install=trl.install_line(),
            config_path=f"{mount}/posttraining/{SFT_JOB}.yaml", config_text=config_text, launch=launch)
    if placement is None:
        sbatch = scripts.sbatch_header(job=SFT_JOB, partition=group.name, nodes=nodes, minutes=HOURS * 60,
                                       requeue=False)
        launch = trl.launch(config_path=f"{mount}/posttraining/{SFT_JOB}.yaml", nodes=nodes, gpus_per_node=gpus,
                            rank="$SLURM_NODEID", head="$head_ip")
        return scripts.sft_slurm(header=header + ["", "Run: sbatch <this file>"], sbatch=sbatch, image=image,
                                 mount=mount, install=trl.install_line(),
                                 config_path=f"{mount}/posttraining/{SFT_JOB}.yaml", config_text=config_text,
                                 launch=launch)
    return _sft_manifest(header, group, placement, nodes, image, mount, config_text)


def _sft_manifest(header: List[str], group: Any, placement: Any, nodes: int, image: str, mount: str,
                  config_text: str) -> str:
    import shlex

    from fmcluster.platforms.kubernetes import job_placement
    from fmcluster.posttraining import trl

    ns = placement.namespace
    head = f"{SFT_JOB}-0.{SFT_JOB}.{ns}.svc.cluster.local"  # an indexed Job's pod 0 under its headless Service
    launch = trl.launch(config_path="/tmp/sft.yaml", nodes=nodes, gpus_per_node=group.instance.gpus,  # noqa: S108
                        rank="$JOB_COMPLETION_INDEX", head=head)
    script = "\n".join(["set -euo pipefail", "cat > /tmp/sft.yaml <<'CONFIG'", config_text.rstrip(), "CONFIG",
                        trl.install_line(),
                        " ".join(a if a.startswith("$") else shlex.quote(a) for a in launch)])
    container = {"name": "trl", "image": image, "command": ["bash", "-c", script],
                 "env": [{"name": "HF_HOME", "value": f"{mount}/posttraining/hf"}]}
    template = job_placement.gpu_pod(group, placement, container=container, mount_point=mount)
    template["spec"].update({"subdomain": SFT_JOB, "restartPolicy": "Never"})
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SFT_JOB, "namespace": ns},
               "spec": {"clusterIP": "None", "selector": {"job-name": SFT_JOB},
                        "ports": [{"name": "rendezvous", "port": trl.PORT}]}}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": SFT_JOB, "namespace": ns, "labels": dict(placement.labels)},
           "spec": {"suspend": True, "completionMode": "Indexed", "completions": nodes, "parallelism": nodes,
                    "backoffLimit": 0, "template": template}}
    header = header + [*placement.notes, "",
                       f"An indexed Job (one pod per node, rank = its index) admitted whole through "
                       f"{placement.labels.get('kueue.x-k8s.io/queue-name')} in namespace {ns}:",
                       "  kubectl apply -f <this file>", f"  kubectl -n {ns} logs -f job/{SFT_JOB}"]
    return _dump(header, [service, job])


def _write(args: argparse.Namespace, render: Any) -> int:
    from fmcluster.outputs import marker
    from fmcluster.outputs.write import claim, emit
    from fmcluster.posttraining import trl, verl
    from fmcluster.registry import load_spec

    out = claim(args.out, "--out", marker.HASH, force=args.force, spec=args.file, mode=0o700) if args.out else None
    spec = load_spec(args.file)
    shown = re.sub(r"[\x00-\x1f\x7f]", "?", args.file)  # the header's comment lines stay comments
    try:
        text = render(spec, args, shown)
    except (verl.UnknownKey, trl.UnknownKey) as e:
        raise UsageError(str(e)) from None
    emit(text, out, args.out)
    return EXIT_OK


def cmd_job_rl(args: argparse.Namespace) -> int:
    return _write(args, render_rl)


def cmd_job_sft(args: argparse.Namespace) -> int:
    return _write(args, render_sft)


def register(kinds: argparse._SubParsersAction[Any]) -> None:
    rl = kinds.add_parser("rl", help="veRL GRPO on Ray across a GPU node group (RayJob, sbatch starting Ray, or a "
                                     "host-file script).")
    rl.set_defaults(func=cmd_job_rl)
    sft = kinds.add_parser("sft", help="Supervised fine-tuning with Hugging Face TRL (indexed Job, sbatch, or a "
                                       "host-file script).")
    sft.set_defaults(func=cmd_job_sft)
    for sp in (rl, sft):
        sp.add_argument("file")
        sp.add_argument("--group", help="GPU node group to run on (default: the first).")
        sp.add_argument("--nodes", type=int, help="Nodes to use (default: all the job may take).")
        sp.add_argument("--model", help="Hugging Face model id (default: a small public model).")
        sp.add_argument("--image", help="Container image (default: the pinned public image).")
        sp.add_argument("--out", help="Write the job here (default: standard output); a file fmcluster did not write "
                                      "is replaced only with --force.")
        sp.add_argument("--force", action="store_true", help="Replace --out even when fmcluster did not write it.")
    rl.add_argument("--rollout-tp", type=int, help="The rollout engine's tensor-parallel size (default: the plan's).")
    sft.add_argument("--dataset", help="Hugging Face data set id (default: trl-lib/Capybara).")
