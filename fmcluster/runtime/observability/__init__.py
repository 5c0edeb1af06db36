"""Node-side observability: what install.sh puts on every node, and the small stdlib collectors it runs.

Runs on the nodes with the node's own python3 (3.9+), standard library only; imports nothing else from fmcluster.

- ``install.sh``: node_exporter (textfile collector), dcgm-exporter (GPU nodes), the EFA and Slurm textfile
  collectors (systemd timers) and Prometheus in agent mode remote-writing to AMP with SigV4. Versions are
  pinned below and every download is checked against the SHA-256 pinned here before it is unpacked.
- ``collector_config``: writes the agent's configuration (scrape jobs and remote_write).
- ``efa_textfile``: EFA port state and hardware counters from sysfs → a textfile.
- ``slurm_textfile``: Slurm node states from ``sinfo`` → a textfile (one Slurm client node per cluster).
- ``slurm_job_map``: Slurm Prolog/Epilog writing which job holds each GPU, for dcgm-exporter's ``hpc_job`` label.
- ``shutdown_mark``: on a clean shutdown, a textfile saying so in the node's last scrapes (NodeStoppedReporting).
- ``profiling_pause.sh``: stop and restart dcgm-exporter around an Nsight session (one profiling client per GPU).

The validator writes its textfile into `TEXTFILE_DIR` too: ``--prom {VALIDATOR_PROM_FILE}``.
"""

from __future__ import annotations

TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"
VALIDATOR_PROM_FILE = f"{TEXTFILE_DIR}/fmcluster_node_validation.prom"
EFA_PROM_FILE = f"{TEXTFILE_DIR}/fmcluster_efa.prom"
SLURM_PROM_FILE = f"{TEXTFILE_DIR}/fmcluster_slurm.prom"
SHUTDOWN_PROM_FILE = f"{TEXTFILE_DIR}/fmcluster_node_shutting_down.prom"

# dcgm-exporter counts Xid events over this window (--xid-count-window-size, ms; its default is 5 minutes): 10
# minutes spans a missed scrape or two, and the Xid alerts in rules.yaml are written for it. install.sh (host
# collectors) and the Kubernetes DaemonSets (platforms/kubernetes/metrics.py) both pass it.
XID_COUNT_WINDOW_MS = 600000

NODE_EXPORTER_PORT = 9100
DCGM_EXPORTER_PORT = 9400
AGENT_PORT = 9090
# Ray's metrics agent on a node while a Ray job runs there (`fmcluster job rl` starts every Ray node with
# --metrics-export-port at it; KubeRay's own default, utils.DefaultMetricsPort). Ray's default is a random port.
RAY_METRICS_PORT = 8080


# The EFA counters' textfile on a systemd timer, for Kubernetes nodes whose exporters run as pods reading the
# textfile directory (EKS user data, the HyperPod on EKS lifecycle script). install.sh writes its own units on the
# other kinds' nodes (with its service user). The runtime lives at /opt/fmcluster/pkg on those nodes.
EFA_TEXTFILE_UNIT_DIR = "/etc/systemd/system"
EFA_TEXTFILE_TIMER_UNIT = "fmcluster-efa-textfile.timer"
EFA_TEXTFILE_UNITS = {
    "fmcluster-efa-textfile.service": (
        "[Unit]\n"
        "Description=fmcluster EFA counters to the node_exporter textfile directory\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "Environment=PYTHONPATH=/opt/fmcluster/pkg\n"
        "ExecStart=/usr/bin/python3 -m fmcluster.runtime.observability.efa_textfile\n"
        "TimeoutStartSec=30\n"
    ),
    EFA_TEXTFILE_TIMER_UNIT: (
        "[Unit]\n"
        "Description=fmcluster EFA counters every 30s\n\n"
        "[Timer]\n"
        "OnBootSec=30s\n"
        "OnUnitActiveSec=30s\n"
        "AccuracySec=1s\n\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    ),
}
