"""`fmcluster job rl` and `fmcluster job sft` on every kind: each renders for the examples with a shared file system
(in-process, no synth); veRL's and TRL's keys are the pinned releases' own; the RayJob fits KubeRay's CRD and its pods
Kubernetes' PodTemplateSpec; Kueue admits the RayJob and the SFT Job whole into the eks cluster's queue; the Slurm
scripts start Ray's head on the first node and a worker on each other by srun."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess

import jsonschema
import kubernetes_validate
import pytest
import yaml
from platforms.kubernetes import kueue_rules
from platforms.kubernetes.schemas import crd_schemas

from fmcluster.cli.errors import UsageError
from fmcluster.cli.posttraining_command import render_rl, render_sft
from fmcluster.platforms.kubernetes import kuberay, kueue
from fmcluster.posttraining import trl, trl_keys, verl, verl_keys
from fmcluster.registry import load_spec

EXAMPLES = {"default": "none", "pcs-p5en-capacity-block": "pcs", "hyperpod-slurm-p5": "hyperpod-slurm",
            "parallelcluster-p5": "parallelcluster", "eks-p5": "eks", "hyperpod-eks-p5": "hyperpod-eks"}


def args(**kw) -> argparse.Namespace:
    base = {"group": None, "nodes": None, "model": None, "image": None, "rollout_tp": None, "dataset": None}
    return argparse.Namespace(**{**base, **kw})


@pytest.fixture(scope="module")
def specs():
    return {name: load_spec(f"examples/{name}.yaml") for name in EXAMPLES}


def verl_overrides(text: str) -> dict:
    """key -> value of every main_ppo override in a rendered job, wherever the job keeps its command."""
    found = {}
    for line in text.splitlines():
        if "verl.trainer.main_ppo" in line:
            for token in shlex.split(line.split("verl.trainer.main_ppo", 1)[1].split("'")[0]) + \
                    re.findall(r"(?<![\w.])([a-z_]+(?:\.[a-z_0-9]+)+=[^\s']+)", line):
                if "=" in token:
                    key, value = token.split("=", 1)
                    found[key] = value
    return found


def test_every_kind_is_covered(specs):
    assert {s.orchestrator.type for s in specs.values()} == set(EXAMPLES.values())


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_job_rl_renders_with_only_the_pinned_verl_keys(specs, example):
    text = render_rl(specs[example], args(), f"examples/{example}.yaml")
    found = verl_overrides(text)
    assert found, "no veRL command in the job"
    assert set(found) <= verl_keys.KEYS, sorted(set(found) - verl_keys.KEYS)
    # the mandatory rollout engine, GRPO, resume from checkpoints on the shared file system
    assert found["actor_rollout_ref.rollout.name"] == verl.ROLLOUT
    assert found["algorithm.adv_estimator"] == "grpo" and found["trainer.resume_mode"] == "auto"
    assert found["trainer.default_local_dir"].startswith("/fsx/")
    assert found["trainer.nnodes"] == str(specs[example].node_groups[0].count) or EXAMPLES[example] == "hyperpod-eks"


def test_verl_and_trl_refuse_a_key_their_release_does_not_have():
    with pytest.raises(verl.UnknownKey, match="trainer.no_such_key"):
        verl.check_keys(["trainer.no_such_key"])
    with pytest.raises(trl.UnknownKey, match="no_such_key"):
        trl.check_keys({"no_such_key": 1})
    assert verl_keys.TAG == f"v{verl.VERSION}" and trl_keys.TAG == f"v{trl.VERSION}"


@pytest.mark.parametrize("example", ["hyperpod-slurm-p5", "parallelcluster-p5", "pcs-p5en-capacity-block"])
def test_slurm_kinds_start_ray_inside_the_allocation(specs, example):
    text = render_rl(specs[example], args(), "spec.yaml")
    group = specs[example].node_groups[0]
    assert f"#SBATCH --partition={group.name}" in text and f"#SBATCH --nodes={group.count}" in text
    assert "--requeue" in text and "ntasks-per-node=1" in text
    head, workers, driver = (text.index('-w "$head_node"'), text.index('-w "$node"'), text.index("srun --overlap"))
    assert head < workers < driver and "ray start --block" in text and "--head" in text
    assert f"--metrics-export-port {kuberay.METRICS_PORT}" in text  # a fixed port for the scrape (Ray's is random)
    shell_clean(text)


def shell_clean(text: str) -> None:
    """bash parses it and shellcheck finds nothing (the fabric job's bar: tests/test_job_command.py)."""
    subprocess.run(["bash", "-n"], input=text, text=True, check=True, timeout=30)
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    r = subprocess.run([shellcheck, "-"], input=text, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout


@pytest.mark.parametrize("example", ["default", "hyperpod-slurm-p5", "parallelcluster-p5", "pcs-p5en-capacity-block"])
def test_every_script_parses_and_is_shellcheck_clean(specs, example):
    shell_clean(render_rl(specs[example], args(), "spec.yaml"))
    shell_clean(render_sft(specs[example], args(), "spec.yaml"))


@pytest.mark.parametrize("job", ["rl", "sft"])
def test_kubernetes_jobs_fit_their_schemas(specs, job):
    for example in ("eks-p5", "hyperpod-eks-p5"):
        spec = specs[example]
        text = (render_rl if job == "rl" else render_sft)(spec, args(), "spec.yaml")
        version = spec.orchestrator.eks.kubernetes_version
        for obj in yaml.safe_load_all(text):
            for template in pod_templates(obj):
                kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate",
                                              "metadata": {"name": "t"}, "template": template}, version, strict=True)
            key = (obj["apiVersion"], obj["kind"])
            if key in crd_schemas():
                jsonschema.Draft7Validator(crd_schemas()[key]).validate(obj)
            else:
                kubernetes_validate.validate(obj, version, strict=True)


def pod_templates(obj: dict) -> list:
    if obj["kind"] == "RayJob":
        cluster = obj["spec"]["rayClusterSpec"]
        return [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]
    return []


def test_the_rayjob_meets_kueues_rules_for_ray():
    """Kueue's RayJob webhook: the cluster is deleted when the job ends, no existing cluster, suspended for the queue."""
    spec = load_spec("examples/eks-p5.yaml")
    (job,) = yaml.safe_load_all(render_rl(spec, args(), "spec.yaml"))
    assert job["spec"]["shutdownAfterJobFinishes"] is True and "clusterSelector" not in job["spec"]
    assert job["spec"]["suspend"] is True and job["metadata"]["labels"][kueue.QUEUE_LABEL] == kueue.QUEUE
    assert len(job["spec"]["rayClusterSpec"]["workerGroupSpecs"]) <= 17  # at most 18 pod sets per Workload


def test_kueue_admits_the_rayjob_whole_into_the_gpu_flavor():
    """The Workload Kueue builds of a SidecarMode RayJob (the head with the submitter's default resources, the
    workers) is admitted on the GPU group's flavor, and each pod fits a node for topology-aware placement."""
    from fmcluster.platforms.kubernetes import allocatable

    spec = load_spec("examples/eks-p5.yaml")
    settings = spec.orchestrator.eks
    group = spec.node_groups[0]
    (job,) = yaml.safe_load_all(render_rl(spec, args(), "spec.yaml"))
    objects = kueue.queue_objects(spec.node_groups, settings)
    queue = next(o for o in objects if o["kind"] == "ClusterQueue")
    flavors = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceFlavor"}
    configuration = kueue.configuration(settings)
    cluster = job["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]["template"]
    head_pod = {**head["spec"], "containers": [*head["spec"]["containers"],
                                               {"name": "ray-job-submitter", "resources": kuberay.SIDECAR_SUBMITTER}]}
    pod_sets = [(head, head_pod, 1)] + [(g["template"], g["template"]["spec"], g["replicas"])
                                        for g in cluster["workerGroupSpecs"]]
    total: dict = {}
    for template, pod, count in pod_sets:
        requests = kueue_rules.podset_requests(pod, count, {}, configuration)
        assert kueue_rules.flavor_for({**template, "spec": pod}, requests, queue, flavors) == group.name
        assert not kueue_rules.node_fit_problems(pod, allocatable.allocatable(group.instance))
        for name, value in requests.items():
            total[name] = total.get(name, 0) + value
    assert kueue_rules.admit({"containers": []}, 1, [], configuration, queue) == {}
    assert not kueue_rules.admission_problems(total, queue)
    assert total["nvidia.com/gpu"] == group.count * group.instance.gpus


def test_kueue_admits_the_sft_job_whole():
    spec = load_spec("examples/eks-p5.yaml")
    settings = spec.orchestrator.eks
    _, job = yaml.safe_load_all(render_sft(spec, args(), "spec.yaml"))
    objects = kueue.queue_objects(spec.node_groups, settings)
    queue = next(o for o in objects if o["kind"] == "ClusterQueue")
    requests = kueue_rules.admit(job["spec"]["template"]["spec"], job["spec"]["parallelism"], [],
                                 kueue.configuration(settings), queue)
    assert requests["nvidia.com/gpu"] == spec.node_groups[0].count * 8


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_job_sft_renders_with_only_trls_keys(specs, example):
    text = render_sft(specs[example], args(), "spec.yaml")
    config = yaml.safe_load(text.split("<<'CONFIG'\n", 1)[1].split("\nCONFIG", 1)[0].replace("\\n", "\n")
                            if "<<'CONFIG'\n" in text else _embedded_config(text))
    trl.check_keys(config)
    assert config["output_dir"].startswith("/fsx/") and config["accelerate_config"] == "fsdp2"
    assert "--num_machines" in text and "--machine_rank" in text


def _embedded_config(text: str) -> str:
    for doc in yaml.safe_load_all(text):
        if doc["kind"] == "Job":
            script = doc["spec"]["template"]["spec"]["containers"][0]["command"][2]
            return script.split("<<'CONFIG'\n", 1)[1].split("\nCONFIG", 1)[0]
    raise AssertionError("no Job")


def test_a_spec_without_a_shared_file_system_is_refused_by_field():
    spec = load_spec("examples/pcs-p5.yaml")
    for render in (render_rl, render_sft):
        with pytest.raises(UsageError, match=r"^storage\.fsx: "):
            render(spec, args(), "spec.yaml")




@pytest.mark.parametrize("example, said", [
    ("eks-p5", "checkpoints under /fsx/checkpoints (checkpoints.tier fsx)"),
    ("default", "checkpoints under /fsx/checkpoints on FSx: checkpoints.tier nvme needs the training code's own "
                "support"),
    ("hyperpod-eks-p5en-training-plan", "checkpoints under /fsx/checkpoints on FSx: checkpoints.tier managed needs"),
])
def test_the_jobs_checkpoint_on_the_shared_file_system_and_say_a_tier_they_cannot_use(example, said):
    """veRL and TRL write every rank's shards to one shared directory: the tier's own where it is one on the shared
    file system, else the file system's /checkpoints, named by its store."""
    from fmcluster.cli.posttraining_command import checkpoint_root

    spec = load_spec(f"examples/{example}.yaml")
    root, note = checkpoint_root(spec, "/fsx")
    assert root == "/fsx/checkpoints" and note.startswith(said)


@pytest.mark.parametrize("example", ["eks-p5", "hyperpod-eks-p5"])
def test_the_pods_mount_the_claim_the_cluster_creates_for_the_shared_file_system(specs, example):
    """The kinds never name a store: the job takes the claim of FSx for Lustre's Kubernetes volume, the claim the
    cluster stack puts into the training and the teams' namespaces (platforms/kubernetes/volumes.py)."""
    from helpers.storage import fsx_mounts

    (fsx,) = fsx_mounts()
    assert fsx.kubernetes is not None
    for text in (render_rl(specs[example], args(), "spec.yaml"), render_sft(specs[example], args(), "spec.yaml")):
        claims = set()
        for obj in yaml.safe_load_all(text):
            for template in pod_templates(obj) + ([obj["spec"]["template"]] if obj["kind"] == "Job" else []):
                for volume in template["spec"]["volumes"]:
                    if "persistentVolumeClaim" in volume:
                        claims.add(volume["persistentVolumeClaim"]["claimName"])
        assert claims == {fsx.kubernetes.claim}


def test_a_placement_without_the_stores_claim_is_refused():
    from fmcluster.platforms.kubernetes import job_placement

    spec = load_spec("examples/eks-p5.yaml")
    placement = spec.orchestrator_kind.job_placement(spec, spec.node_groups[0])
    with pytest.raises(ValueError, match="placement.claim"):
        job_placement.gpu_pod(spec.node_groups[0], placement, container={"name": "c", "image": "i"}, mount_point="/m")
