"""The straggler alert's scenarios (docs/observability.md, "Jobs and stragglers"), as promtool test groups.

A synchronous job waits for its slowest rank at every collective. One slow GPU is named with its job, node and GPU
(on 1, 2 and 4 nodes), a node whose every GPU lags alike is named once, and each signal is shown: SM clock low (a
throttled GPU), SM activity low (a dead GPU, a starved host: SM activity 0.3 against 0.9 with equal tensor
activity), tensor activity high (a GPU computing while its peers wait), a node's EFA bytes low. Healthy, idle,
uniformly slow and single-GPU jobs stay quiet. Two jobs sharing a node keep every job's EFA series. Kubernetes
pods belong to their training job: a PyTorchJob, an MPIJob (its launcher is a batch Job of it), a JobSet (one
batch Job per replicated job), a CronJob's run on its own, a bare pod on its own.
"""

from __future__ import annotations

from typing import List

from helpers.promtool_tests import Gpu, Scenario, efa, gauge, pick, slurm_job

ALERT = "JobStragglerNode"
UNKNOWN = "unknown: not throttled, EFA and GPU memory healthy (data loading, host CPU?)"


def _straggler(job_id: str, node: str, signal: str, cause: str, gpu=None) -> dict:
    labels = {"job_id": job_id, "node": node, "signal": signal, "likely_cause": cause}
    return labels if gpu is None else {**labels, "gpu": gpu}


def one_node_half_clock() -> Scenario:
    s = Scenario("one GPU of a one-node job at half clock, thermally throttled: that GPU is named")
    gpus = slurm_job("11", ["n1"])
    (slow,) = pick(gpus, "n1", 3)
    slow.clock, slow.thermal, slow.tensor, slow.sm = 990.0, 0.4, 0.75, 0.92  # it computes while the others wait
    s.add_gpus(gpus)
    s.expect(ALERT, _straggler("slurm/11", "n1", "SM clock low", "clock throttling", gpu=3))
    return s


def two_nodes_dead_gpu() -> Scenario:
    s = Scenario("a dead GPU (no activity, idle clock) on one of 2 nodes: named, cause unknown")
    gpus = slurm_job("12", ["b1", "b2"])
    (dead,) = pick(gpus, "b2", 5)
    dead.sm, dead.tensor, dead.clock = 0.0, 0.0, 345.0
    s.add_gpus(gpus)
    s.expect(ALERT, _straggler("slurm/12", "b2", "SM activity low", UNKNOWN, gpu=5))
    return s


def four_nodes_slow_gpu_with_row_remaps() -> Scenario:
    s = Scenario("a GPU of a 4-node job computes longer at full clock (tensor activity high), a row remap pending")
    gpus = slurm_job("13", ["d1", "d2", "d3", "d4"])
    (slow,) = pick(gpus, "d3", 6)
    slow.tensor, slow.sm, slow.remap_pending = 0.78, 0.93, 1
    s.add_gpus(gpus)
    s.expect(ALERT, _straggler("slurm/13", "d3", "tensor activity high", "GPU with row remaps pending", gpu=6))
    return s


def four_nodes_sm_only_gpu() -> Scenario:
    s = Scenario("one GPU of a 4-node job at SM activity 0.3 against 0.9, equal tensor activity: named")
    gpus = slurm_job("14", ["f1", "f2", "f3", "f4"])
    for g in gpus:
        g.sm, g.tensor = 0.9, 0.5
    (starved,) = pick(gpus, "f2", 1)
    starved.sm = 0.3
    s.add_gpus(gpus)
    s.expect(ALERT, _straggler("slurm/14", "f2", "SM activity low", UNKNOWN, gpu=1))
    return s


def sm_only_node() -> Scenario:
    s = Scenario("a node at SM activity 0.3 against peers at 0.9, equal tensor activity: the node is named once")
    gpus = slurm_job("15", ["s1", "s2", "s3", "s4"])
    for g in gpus:
        g.sm, g.tensor = (0.3 if g.node == "s4" else 0.9), 0.5
    s.add_gpus(gpus)
    s.expect(ALERT, _straggler("slurm/15", "s4", "SM activity low", UNKNOWN))
    return s


def throttled_node() -> Scenario:
    s = Scenario("every GPU of one node thermally throttled: the node is named once, clock throttling")
    gpus = slurm_job("16", ["t1", "t2", "t3"])
    for g in pick(gpus, "t3"):
        g.clock, g.thermal, g.tensor = 1410.0, 0.3, 0.7
    s.add_gpus(gpus)
    s.expect(ALERT, _straggler("slurm/16", "t3", "SM clock low", "clock throttling"))
    return s


def quiet_jobs() -> Scenario:
    s = Scenario("healthy, idle, uniformly slow and single-GPU jobs raise nothing")
    healthy = slurm_job("21", ["h1", "h2", "h3", "h4"])
    idle = slurm_job("22", ["i1", "i2"])
    for g in idle:
        g.sm, g.tensor, g.clock = 0.02, 0.01, 345.0
    idle[3].sm = 0.0  # an idle GPU lower than its idle peers is not a straggler
    slow = slurm_job("23", ["u1", "u2"])
    for g in slow:
        g.clock, g.thermal = 1410.0, 0.3
    single = [Gpu("x1", 0, {"hpc_job": "24"}, sm=0.2, tensor=0.9, clock=990.0)]
    for gpus in (healthy, idle, slow, single):
        s.add_gpus(gpus)
    s.expect(ALERT)
    s.expect_samples('fmcluster:job_straggler:bool{cluster="c"}', [])
    return s


def shared_node_and_degraded_efa() -> Scenario:
    s = Scenario("two jobs share node e5 (each keeps its EFA series); job 31's node e4 moves half its peers' EFA bytes")
    job31 = slurm_job("31", ["e1", "e2", "e3", "e4"])
    for g in pick(job31, "e4"):
        g.tensor = 0.45  # waiting on its link
    shared = [Gpu("e5", g, {"hpc_job": "32" if g < 4 else "33"}) for g in range(8)]
    s.add_gpus(job31 + shared + slurm_job("32", ["e6"]))
    for node in ("e1", "e2", "e3"):
        s.series += efa(s.cluster, node, 40e9)
    s.series += efa(s.cluster, "e4", 12e9, drops_per_s=10)
    s.series += efa(s.cluster, "e5", 30e9) + efa(s.cluster, "e6", 30e9)
    s.expect(ALERT, _straggler("slurm/31", "e4", "EFA bytes low", "degraded EFA link"))
    s.expect_samples('round(fmcluster:job_node_efa_bytes:rate5m{node="e5"} / 1e9)', [  # GB/s
        {"labels": '{cluster="c",job_id="slurm/32",node="e5"}', "value": 30},
        {"labels": '{cluster="c",job_id="slurm/33",node="e5"}', "value": 30},
    ])
    return s


def _pod(s: Scenario, node: str, namespace: str, pod: str, owner_kind: str, owner: str, gpus: int = 8) -> List[Gpu]:
    s.series.append(gauge("kube_pod_owner", {"cluster": s.cluster, "namespace": namespace, "pod": pod,
                                             "owner_kind": owner_kind, "owner_name": owner,
                                             "owner_is_controller": "true" if owner_kind != "<none>" else "<none>"}, 1))
    job = {"namespace": namespace, "pod": pod, "container": "main"}
    return [Gpu(node, g, job) for g in range(gpus)]


def _job_owner(s: Scenario, namespace: str, job: str, owner_kind: str, owner: str) -> None:
    s.series.append(gauge("kube_job_owner", {"cluster": s.cluster, "namespace": namespace, "job_name": job,
                                             "owner_kind": owner_kind, "owner_name": owner,
                                             "owner_is_controller": "true" if owner_kind != "<none>" else "<none>"}, 1))


def kubernetes_jobs() -> Scenario:
    s = Scenario("Kubernetes: a JobSet's, an MPIJob's and a PyTorchJob's pods are one job each; a straggler in the JobSet")
    ns = "training"
    # JobSet llm-js: replicated job "workers" with 2 indexes, one batch Job each, one pod per Job
    for i in range(2):
        _job_owner(s, ns, f"llm-js-workers-{i}", "JobSet", "llm-js")
    jobset = (_pod(s, "ip-10-0-1-1", ns, "llm-js-workers-0-0-abcde", "Job", "llm-js-workers-0")
              + _pod(s, "ip-10-0-1-2", ns, "llm-js-workers-1-0-fghij", "Job", "llm-js-workers-1"))
    jobset[11].clock = 990.0  # GPU 3 of the second node
    # MPIJob nccl: workers owned by the MPIJob, the launcher a batch Job it owns (no GPU)
    _job_owner(s, ns, "nccl-launcher", "MPIJob", "nccl")
    mpi = (_pod(s, "ip-10-0-1-3", ns, "nccl-worker-0", "MPIJob", "nccl")
           + _pod(s, "ip-10-0-1-4", ns, "nccl-worker-1", "MPIJob", "nccl"))
    _pod(s, "ip-10-0-1-9", ns, "nccl-launcher-xyz12", "Job", "nccl-launcher", gpus=0)
    torch = (_pod(s, "ip-10-0-1-5", ns, "ft-master-0", "PyTorchJob", "ft")
             + _pod(s, "ip-10-0-1-6", ns, "ft-worker-0", "PyTorchJob", "ft"))
    # a CronJob's run and a bare pod: each its own job
    _job_owner(s, ns, "eval-29000000", "CronJob", "eval")
    cron = _pod(s, "ip-10-0-1-7", ns, "eval-29000000-k2j4l", "Job", "eval-29000000", gpus=2)
    bare = _pod(s, "ip-10-0-1-8", ns, "debug", "<none>", "<none>", gpus=1)
    for gpus in (jobset, mpi, torch, cron, bare):
        s.add_gpus(gpus)
    s.expect(ALERT, _straggler(f"{ns}/llm-js", "ip-10-0-1-2", "SM clock low", "clock throttling", gpu=3))
    s.expect_samples("fmcluster:job_gpus:count", [
        {"labels": f'fmcluster:job_gpus:count{{cluster="c",job_id="{ns}/{job}"}}', "value": n}
        for job, n in (("debug", 1), ("eval-29000000", 2), ("ft", 16), ("llm-js", 16), ("nccl", 16))], at="5m")
    return s


def ray_job() -> Scenario:
    s = Scenario("Kubernetes: a RayJob's head and workers (pods KubeRay's RayCluster owns) are one job; a slow worker")
    ns = "training"
    # veRL's RayJob: its RayCluster verl-grpo-x7k2p owns the head pod and every worker pod, each a whole GPU node
    ray = (_pod(s, "ip-10-0-2-1", ns, "verl-grpo-x7k2p-head-abcde", "RayCluster", "verl-grpo-x7k2p")
           + _pod(s, "ip-10-0-2-2", ns, "verl-grpo-x7k2p-gpu-worker-fghij", "RayCluster", "verl-grpo-x7k2p")
           + _pod(s, "ip-10-0-2-3", ns, "verl-grpo-x7k2p-gpu-worker-klmno", "RayCluster", "verl-grpo-x7k2p"))
    ray[21].clock = 990.0  # GPU 5 of the third node
    s.add_gpus(ray)
    s.expect(ALERT, _straggler(f"{ns}/verl-grpo-x7k2p", "ip-10-0-2-3", "SM clock low", "clock throttling", gpu=5))
    s.expect_samples("fmcluster:job_gpus:count", [
        {"labels": f'fmcluster:job_gpus:count{{cluster="c",job_id="{ns}/verl-grpo-x7k2p"}}', "value": 24}], at="5m")
    return s


def slurm_without_job_map() -> Scenario:
    s = Scenario("Slurm without the job mapping: a node held by one job (squeue) gives it its GPUs; a shared one none")
    for node in ("s1", "s2", "s3"):
        s.series.append(gauge("DCGM_FI_DEV_GPU_TEMP", {"cluster": s.cluster, "node": node, "gpu": 0}, 60))
    for job, node in (("707", "s1"), ("707", "s2"), ("708", "s3"), ("709", "s3")):
        s.series.append(gauge("fmcluster_slurm_job_node", {"cluster": s.cluster, "node": "login", "job_id": job,
                                                           "slurm_node": node}, 1))
    s.expect_samples("fmcluster:gpu_job:info", [
        {"labels": f'fmcluster:gpu_job:info{{cluster="c",gpu="0",job_id="slurm/707",node="{n}"}}', "value": 1}
        for n in ("s1", "s2")], at="2m")
    return s


SCENARIOS = (one_node_half_clock, two_nodes_dead_gpu, four_nodes_slow_gpu_with_row_remaps, four_nodes_sm_only_gpu,
             sm_only_node, throttled_node, quiet_jobs, shared_node_and_degraded_efa, kubernetes_jobs, ray_job,
             slurm_without_job_map)


def scenarios() -> List[Scenario]:
    return [build() for build in SCENARIOS]
