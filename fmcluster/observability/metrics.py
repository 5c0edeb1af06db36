"""The catalog of every metric fmcluster's rules and dashboards rely on, with the exporter that produces it.

One place to look up a metric name: the alert rules (rules.yaml), the dashboards (dashboards/*.json) and the
node-side collectors (fmcluster/runtime/observability) all agree with this table, and
tests/observability/test_metric_coverage.py fails when an expression names a metric that is not here.

Producers, all deployed by fmcluster on every node (fmcluster/runtime/observability/install.sh):

- ``dcgm-exporter``: NVIDIA's exporter, fed the field list in fmcluster/runtime/observability/dcgm-counters.csv;
  a metric of that kind is listed here only if the CSV enables its field (checked by a test).
- ``node_exporter``: Prometheus node_exporter with the textfile collector reading ``TEXTFILE_DIR``.
- ``fmcluster-validator``: the boot-time validator (``python3 -m fmcluster.runtime.validate --prom FILE``),
  a textfile read by node_exporter. Its names are the contract in `VALIDATOR_METRICS`.
- ``fmcluster-efa``: ``fmcluster/runtime/observability/efa_textfile.py`` (EFA port state and hw counters
  from sysfs), a textfile read by node_exporter.
- ``fmcluster-slurm``: ``fmcluster/runtime/observability/slurm_textfile.py`` (``sinfo``) on one Slurm client node
  per cluster (HyperPod controller, AWS PCS login node, ParallelCluster head node), a textfile read by node_exporter.
- ``fmcluster-bootstrap``: the node's bootstrap itself, a textfile read by node_exporter: a GPU node that cannot run
  dcgm-exporter says so (ParallelCluster's official AMI has no docker: fmcluster/orchestrators/parallelcluster/node/),
  and a node that shuts down cleanly says so in its last scrapes (install.sh's shutdown unit).
- ``prometheus``: series every scrape produces (``up``) and the AMP ruler writes (``ALERTS``).
- ``training-job``: a training job's rank 0, a textfile in ``TEXTFILE_DIR`` read by node_exporter (optional: the job
  dashboard's tokens per second; docs/observability.md, "Job dashboard and the plan's bound").
- ``vllm``, ``sglang``: the engines of a ``serving`` deployment, scraped from its pods in the serving namespace
  (fmcluster/platforms/kubernetes/metrics.py; their own names and their ``model_name`` label, the served name; vLLM's
  docs/design/metrics.md, SGLang's python/sglang/srt/metrics/collector.py; docs/serving.md, "Telemetry").
- ``ray``: Ray's metrics agent on every Ray node while a Ray job runs (post-training: KubeRay's pods, scraped by the
  managed scraper's ray job; Ray nodes in a Slurm job, by the node collector's; docs/post-training.md, "Telemetry").
- ``kube-state-metrics``: on Kubernetes clusters (eks, hyperpod-eks), objects' state; HyperPod's health labels of
  nodes through ``kube_node_labels`` (fmcluster/platforms/kubernetes/metrics.py).

Standard library only: the runtime side may read the same names from its own copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Set, Tuple

# Where node_exporter's textfile collector reads *.prom files; the validator writes its file here.
TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"

DCGM_EXPORTER = "dcgm-exporter"
NODE_EXPORTER = "node_exporter"
VALIDATOR = "fmcluster-validator"
EFA_COLLECTOR = "fmcluster-efa"
SLURM_COLLECTOR = "fmcluster-slurm"
BOOTSTRAP = "fmcluster-bootstrap"
PROMETHEUS = "prometheus"
KUBE_STATE_METRICS = "kube-state-metrics"
TRAINING_JOB = "training-job"
VLLM = "vllm"
SGLANG = "sglang"
RAY = "ray"

EXPORTERS = (DCGM_EXPORTER, NODE_EXPORTER, VALIDATOR, EFA_COLLECTOR, SLURM_COLLECTOR, BOOTSTRAP, PROMETHEUS,
             KUBE_STATE_METRICS, TRAINING_JOB, VLLM, SGLANG, RAY)

# Labels the collector adds to every series it scrapes (fmcluster/runtime/observability/collector_config.py).
TARGET_LABELS = ("cluster", "node", "instance_id", "instance_type", "node_group")

# The values of the status label of fmcluster_node_check_status (the validator's report statuses).
CHECK_STATUSES = ("pass", "fail", "warn", "skip", "error")


@dataclass(frozen=True)
class Metric:
    name: str
    exporter: str
    type: str  # gauge | counter
    help: str
    labels: Tuple[str, ...] = ()


def _m(name: str, exporter: str, type_: str, help_: str, *labels: str) -> Metric:
    return Metric(name, exporter, type_, help_, tuple(labels))


# hpc_job: the Slurm job of the GPU (--hpc-job-mapping-dir); namespace, pod, container: the Kubernetes pod that holds
# it (DCGM_EXPORTER_KUBERNETES, the kubelet's pod-resources API). Present only where that mapping applies.
_DCGM_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "hpc_job", "namespace", "pod", "container")

CATALOG: Tuple[Metric, ...] = (
    # --- dcgm-exporter (fields enabled in dcgm-counters.csv) ---------------------------------------
    _m("DCGM_FI_DEV_GPU_TEMP", DCGM_EXPORTER, "gauge", "GPU temperature (C).", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_MEMORY_TEMP", DCGM_EXPORTER, "gauge", "HBM temperature (C).", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_MEM_MAX_OP_TEMP", DCGM_EXPORTER, "gauge",
       "HBM maximum operating temperature (C); above it the GPU slows down.", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_SM_CLOCK", DCGM_EXPORTER, "gauge", "SM clock (MHz).", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_MEM_CLOCK", DCGM_EXPORTER, "gauge", "Memory clock (MHz).", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_POWER_USAGE", DCGM_EXPORTER, "gauge", "Power draw (W).", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_GPU_UTIL", DCGM_EXPORTER, "gauge", "GPU utilization (%).", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_FB_USED", DCGM_EXPORTER, "gauge", "Framebuffer used (MiB).", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_FB_FREE", DCGM_EXPORTER, "gauge", "Framebuffer free (MiB).", *_DCGM_LABELS),
    _m("DCGM_EXP_XID_ERRORS_COUNT", DCGM_EXPORTER, "gauge",
       "Xid events per code within the exporter's window (--xid-count-window-size); 0 without xid label when none.",
       *_DCGM_LABELS, "xid", "window_size_in_ms"),
    _m("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", DCGM_EXPORTER, "counter", "Volatile single-bit ECC errors (not on Blackwell).",
       *_DCGM_LABELS),
    _m("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", DCGM_EXPORTER, "counter", "Volatile double-bit (uncorrectable) ECC errors.",
       *_DCGM_LABELS),
    _m("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", DCGM_EXPORTER, "counter", "Rows remapped for uncorrectable errors.",
       *_DCGM_LABELS),
    _m("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", DCGM_EXPORTER, "counter", "Rows remapped for correctable errors.",
       *_DCGM_LABELS),
    _m("DCGM_FI_DEV_ROW_REMAP_FAILURE", DCGM_EXPORTER, "gauge", "1 when row remapping failed.", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_ROW_REMAP_PENDING", DCGM_EXPORTER, "gauge", "1 when a row remap waits for a GPU reset.",
       *_DCGM_LABELS),
    _m("DCGM_FI_DEV_THERMAL_VIOLATION", DCGM_EXPORTER, "counter", "Nanoseconds the clocks were held down by thermal limits.",
       *_DCGM_LABELS),
    _m("DCGM_FI_DEV_POWER_VIOLATION", DCGM_EXPORTER, "counter", "Nanoseconds the clocks were held down by power limits.",
       *_DCGM_LABELS),
    _m("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", DCGM_EXPORTER, "counter", "PCIe replays.", *_DCGM_LABELS),
    # NVLink error counters per GPU architecture (dcgm-counters-<gpu_arch>.csv): Hopper's totals, Blackwell's COUNT_*
    _m("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", DCGM_EXPORTER, "counter", "NVLink replays (Hopper).",
       *_DCGM_LABELS),
    _m("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", DCGM_EXPORTER, "counter", "NVLink recoveries (Hopper).",
       *_DCGM_LABELS),
    _m("DCGM_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS", DCGM_EXPORTER, "counter",
       "Times a link went from up to recovery failed and down, all links (NVLink5: Blackwell).", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS", DCGM_EXPORTER, "counter",
       "NVLink effective errors, all links (NVLink5: Blackwell).", *_DCGM_LABELS),
    _m("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", DCGM_EXPORTER, "counter", "NVLink bandwidth counter, all links.",
       *_DCGM_LABELS),
    # profiling fields per GPU architecture (dcgm-counters-<gpu_arch>.csv): ratios 0..1, or bytes per second
    _m("DCGM_FI_PROF_GR_ENGINE_ACTIVE", DCGM_EXPORTER, "gauge", "Ratio of time the graphics engine is active.",
       *_DCGM_LABELS),
    _m("DCGM_FI_PROF_SM_ACTIVE", DCGM_EXPORTER, "gauge", "Ratio of cycles an SM has at least one warp assigned.",
       *_DCGM_LABELS),
    _m("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", DCGM_EXPORTER, "gauge", "Ratio of cycles the tensor pipe is active.",
       *_DCGM_LABELS),
    _m("DCGM_FI_PROF_DRAM_ACTIVE", DCGM_EXPORTER, "gauge", "Ratio of cycles device memory is sending or receiving.",
       *_DCGM_LABELS),
    _m("DCGM_FI_PROF_PCIE_TX_BYTES", DCGM_EXPORTER, "gauge", "PCIe bytes sent per second.", *_DCGM_LABELS),
    _m("DCGM_FI_PROF_PCIE_RX_BYTES", DCGM_EXPORTER, "gauge", "PCIe bytes received per second.", *_DCGM_LABELS),
    _m("DCGM_FI_PROF_NVLINK_TX_BYTES", DCGM_EXPORTER, "gauge", "NVLink bytes sent per second.", *_DCGM_LABELS),
    _m("DCGM_FI_PROF_NVLINK_RX_BYTES", DCGM_EXPORTER, "gauge", "NVLink bytes received per second.", *_DCGM_LABELS),
    # --- node_exporter --------------------------------------------------------------------------------
    _m("node_filesystem_avail_bytes", NODE_EXPORTER, "gauge", "Bytes available to non-root users.",
       "device", "fstype", "mountpoint"),
    _m("node_filesystem_size_bytes", NODE_EXPORTER, "gauge", "File system size in bytes.",
       "device", "fstype", "mountpoint"),
    _m("node_filesystem_device_error", NODE_EXPORTER, "gauge", "1 when statfs on the mount failed or timed out.",
       "device", "fstype", "mountpoint"),
    _m("node_textfile_scrape_error", NODE_EXPORTER, "gauge", "1 when a textfile could not be read or parsed."),
    _m("node_textfile_mtime_seconds", NODE_EXPORTER, "gauge", "Modification time of each textfile.", "file"),
    _m("node_cpu_seconds_total", NODE_EXPORTER, "counter", "CPU time by mode.", "cpu", "mode"),
    _m("node_memory_MemAvailable_bytes", NODE_EXPORTER, "gauge", "Memory available."),
    _m("node_memory_MemTotal_bytes", NODE_EXPORTER, "gauge", "Memory total."),
    _m("node_network_receive_bytes_total", NODE_EXPORTER, "counter", "Bytes received per interface.", "device"),
    _m("node_network_transmit_bytes_total", NODE_EXPORTER, "counter", "Bytes sent per interface.", "device"),
    _m("node_boot_time_seconds", NODE_EXPORTER, "gauge", "Boot time (Unix seconds)."),
    # --- the boot-time validator (fmcluster/runtime/report.py to_prom; checked by a test) ---------------
    _m("fmcluster_node_check_status", VALIDATOR, "gauge",
       "1 for the status the check ended in, 0 for the other four (one series per status).",
       "check", "layer", "status"),
    _m("fmcluster_node_check_duration_seconds", VALIDATOR, "gauge", "How long the check ran.", "check", "layer"),
    _m("fmcluster_node_validation_healthy", VALIDATOR, "gauge", "1 when every required check passed, else 0.",
       "instance_type", "level"),
    _m("fmcluster_node_validation_failed_checks", VALIDATOR, "gauge", "Required checks that did not pass.",
       "instance_type", "level"),
    _m("fmcluster_node_validation_duration_seconds", VALIDATOR, "gauge", "Wall time of the last validation.",
       "instance_type", "level"),
    _m("fmcluster_node_validation_last_run_timestamp_seconds", VALIDATOR, "gauge",
       "When the validator last finished (Unix seconds).", "instance_type", "level"),
    # --- EFA (fmcluster/runtime/observability/efa_textfile.py) ----------------------------------------
    _m("fmcluster_efa_devices", EFA_COLLECTOR, "gauge", "EFA devices found in /sys/class/infiniband."),
    _m("fmcluster_efa_port_active", EFA_COLLECTOR, "gauge", "1 when the port state is ACTIVE.", "device", "port"),
    _m("fmcluster_efa_hw_stat_total", EFA_COLLECTOR, "counter",
       "EFA hardware counter from ports/<port>/hw_counters/<counter>.", "device", "port", "counter"),
    # --- Slurm (fmcluster/runtime/observability/slurm_textfile.py: HyperPod controller, PCS login node) ----
    _m("fmcluster_slurm_nodes", SLURM_COLLECTOR, "gauge", "Slurm nodes per base state.", "state"),
    _m("fmcluster_slurm_node_state", SLURM_COLLECTOR, "gauge", "1 for the node's current base state.",
       "slurm_node", "state"),
    _m("fmcluster_slurm_node_responding", SLURM_COLLECTOR, "gauge", "0 when slurmctld marks the node not responding.",
       "slurm_node"),
    _m("fmcluster_slurm_node_powered_down", SLURM_COLLECTOR, "gauge",
       "1 while Slurm has the node powered off or powering off (sinfo ~ or %: idle dynamic nodes), else 0.",
       "slurm_node"),
    _m("fmcluster_slurm_collector_success", SLURM_COLLECTOR, "gauge", "1 when sinfo answered in time."),
    _m("fmcluster_slurm_job_node", SLURM_COLLECTOR, "gauge", "1 for each node a running job holds (squeue).",
       "job_id", "slurm_node"),
    # --- the node's bootstrap (ParallelCluster's on_node_configured.sh) -------------------------------------
    _m("fmcluster_gpu_metrics_unavailable", BOOTSTRAP, "gauge",
       "1 on a GPU node that runs no GPU exporter, with the reason (no-docker); absent where dcgm-exporter runs.",
       "reason"),
    # --- the node's shutdown unit (install.sh: fmcluster-shutdown-mark.service, runtime/observability/shutdown_mark.py)
    _m("fmcluster_node_shutting_down", BOOTSTRAP, "gauge",
       "1 in the node's last scrapes when its operating system shuts down cleanly (scale-in, replacement, teardown); "
       "absent otherwise."),
    # --- every scrape ---------------------------------------------------------------------------------
    _m("up", PROMETHEUS, "gauge", "1 when the last scrape of the target succeeded.", "job"),
    # --- the AMP ruler, for every alerting rule ---------------------------------------------------------
    _m("ALERTS", PROMETHEUS, "gauge", "1 per pending or firing alert.", "alertname", "alertstate", "severity"),
    # --- kube-state-metrics on Kubernetes clusters: node labels it is allowed to export (HyperPod's health) ---------
    _m("kube_node_labels", KUBE_STATE_METRICS, "gauge", "1 per node, its allowlisted labels as label_<name>.",
       "node", "label_sagemaker_amazonaws_com_node_health_status", "label_sagemaker_amazonaws_com_deep_health_check_status",
       "label_sagemaker_amazonaws_com_fault_type", "label_sagemaker_amazonaws_com_fault_reason"),
    # --- a training job that exports its progress (rank 0 writes a textfile; optional) --------------------------
    _m("fmcluster_job_tokens_total", TRAINING_JOB, "counter", "Tokens the job has trained on so far.", "job_id"),
    # --- Ray's metrics agent (system metrics: https://docs.ray.io/en/latest/ray-observability/reference/system-metrics.html)
    _m("ray_cluster_active_nodes", RAY, "gauge", "Ray nodes alive in the Ray cluster, by node type.",
       "node_type", "ray_io_cluster"),
    _m("ray_actors", RAY, "gauge", "Ray actors by state (ALIVE, PENDING_CREATION, DEAD, ...) and class.",
       "State", "Name", "ray_io_cluster"),
    _m("ray_tasks", RAY, "gauge", "Ray tasks by state and function.", "State", "Name", "ray_io_cluster"),
    _m("ray_node_gpus_utilization", RAY, "gauge", "Each GPU's utilization as Ray sees it (percent).",
       "GpuIndex", "GpuDeviceName", "ray_io_cluster"),
    _m("ray_node_gram_used", RAY, "gauge", "GPU memory Ray's processes use on each GPU (bytes).", "GpuIndex",
       "ray_io_cluster"),
    # --- kube-state-metrics: which workload owns a pod (a job's GPUs on Kubernetes; default pod metric) -------------
    _m("kube_pod_owner", KUBE_STATE_METRICS, "gauge", "1 per pod and owner reference.",
       "namespace", "pod", "owner_kind", "owner_name", "owner_is_controller"),
    # a batch Job's owner: a JobSet's child Jobs, the MPI operator's launcher Job (owner_kind "<none>" without one)
    _m("kube_job_owner", KUBE_STATE_METRICS, "gauge", "1 per Job and owner reference.",
       "namespace", "job_name", "owner_kind", "owner_name", "owner_is_controller"),
    # --- the serving engines (a serving section; counters and histograms by their names on the wire) ------------
    _m("vllm:num_requests_waiting", VLLM, "gauge", "Requests waiting in the engine's queue.", "model_name", "pod"),
    _m("vllm:num_requests_running", VLLM, "gauge", "Requests the engine is running.", "model_name", "pod"),
    _m("vllm:kv_cache_usage_perc", VLLM, "gauge", "Share of the KV cache's blocks in use (0-1).", "model_name", "pod"),
    _m("vllm:num_preemptions_total", VLLM, "counter", "Requests preempted for KV cache space.", "model_name", "pod"),
    _m("vllm:time_to_first_token_seconds_bucket", VLLM, "counter", "Time to first token, histogram buckets.",
       "model_name", "le"),
    _m("vllm:time_to_first_token_seconds_count", VLLM, "counter", "Requests whose first token was timed.",
       "model_name"),
    _m("vllm:request_time_per_output_token_seconds_bucket", VLLM, "counter",
       "Time per output token of each request, histogram buckets.", "model_name", "le"),
    _m("vllm:generation_tokens_total", VLLM, "counter", "Output tokens generated.", "model_name", "pod"),
    _m("sglang:num_queue_reqs", SGLANG, "gauge", "Requests in the waiting queue.", "model_name", "pod"),
    _m("sglang:num_running_reqs", SGLANG, "gauge", "Requests running.", "model_name", "pod"),
    _m("sglang:token_usage", SGLANG, "gauge", "Share of the KV cache's token slots in use (0-1).", "model_name", "pod"),
    _m("sglang:num_retracted_requests_total", SGLANG, "counter",
       "Requests retracted (SGLang's preemption) for KV cache space.", "model_name", "pod"),
    _m("sglang:time_to_first_token_seconds_bucket", SGLANG, "counter", "Time to first token, histogram buckets.",
       "model_name", "le"),
    _m("sglang:time_to_first_token_seconds_count", SGLANG, "counter", "Requests whose first token was timed.",
       "model_name"),
    _m("sglang:inter_token_latency_seconds_bucket", SGLANG, "counter", "Inter-token latency, histogram buckets.",
       "model_name", "le"),
    _m("sglang:generation_tokens_total", SGLANG, "counter", "Output tokens generated.", "model_name", "pod"),
    # one series per Node object: gone when the Node is deleted (scale-in, replacement), kept while it is NotReady
    _m("kube_node_info", KUBE_STATE_METRICS, "gauge", "1 per Node object, with its versions and addresses.", "node"),
)

BY_NAME: Dict[str, Metric] = {m.name: m for m in CATALOG}

# The validator's names, for its author: python3 -m fmcluster.runtime.validate --prom FILE must write these.
VALIDATOR_METRICS: Tuple[str, ...] = tuple(m.name for m in CATALOG if m.exporter == VALIDATOR)

# EFA hw_counters the rules read (names as in /sys/class/infiniband/<dev>/ports/1/hw_counters, EC2 user guide).
EFA_ERROR_COUNTERS = (
    "rx_drops",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
    "rdma_read_wr_err",
    "rdma_write_wr_err",
)

# --- PromQL: which metric names does an expression use? ---------------------------------------------

_PROMQL_KEYWORDS = frozenset(
    """by without on ignoring group_left group_right bool and or unless offset atan2
    sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio inf nan""".split()
)
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> Set[str]:
    """The metric names a PromQL expression (or a Grafana query with $variables) selects.

    A small scanner, not a parser: it drops strings, label matchers ``{...}``, ranges ``[...]``, grouping
    clauses ``by (...)`` and function calls' names, and returns the identifiers left.
    """
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    s = re.sub(r"\{[^{}]*\}", " ", s)
    s = re.sub(r"\[[^\[\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", s)
    s = re.sub(r"\blabel_values\s*\(([^,()]*)(,[^()]*)?\)", r" \1 ", s)  # Grafana: label_values(metric, label)
    s = re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_:]*\}?", " ", s)  # Grafana variables
    s = re.sub(r"\boffset\s+-?[0-9a-z]+", " ", s)
    names: Set[str] = set()
    for m in _IDENT.finditer(s):
        word = m.group(0)
        rest = s[m.end():].lstrip()
        if rest.startswith("("):
            continue  # a function or aggregation
        if word.lower() in _PROMQL_KEYWORDS:
            continue
        if re.fullmatch(r"[0-9]+[smhdwy]", word) or re.fullmatch(r"[eE][0-9]+", word):
            continue
        names.add(word)
    return names


def unknown_metrics(exprs: Iterable[str], extra_known: FrozenSet[str] = frozenset()) -> Dict[str, List[str]]:
    """Metric name → expressions using it, for every name neither in the catalog nor in `extra_known`."""
    unknown: Dict[str, List[str]] = {}
    for expr in exprs:
        for name in sorted(metric_names(expr)):
            if name not in BY_NAME and name not in extra_known:
                unknown.setdefault(name, []).append(expr)
    return unknown
