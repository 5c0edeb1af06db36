"""Node-side observability: what install.sh puts on every node, and the small stdlib collectors it runs.

Runs on the nodes with the node's own python3 (3.9+), standard library only; imports nothing else from fmcluster.

- ``install.sh``: node_exporter (textfile collector), dcgm-exporter (GPU nodes), the EFA and Slurm textfile
  collectors (systemd timers) and Prometheus in agent mode remote-writing to AMP with SigV4. Versions are
  pinned below and every download is checked against the SHA-256 pinned here before it is unpacked.
- ``collector_config``: writes the agent's configuration (scrape jobs and remote_write).
- ``efa_textfile``: EFA port state and hardware counters from sysfs → a textfile.
- ``slurm_textfile``: Slurm node states from ``sinfo`` → a textfile (one Slurm client node per cluster).

The validator writes its textfile into `TEXTFILE_DIR` too: ``--prom {VALIDATOR_PROM_FILE}``.
"""

from __future__ import annotations

TEXTFILE_DIR = "/var/lib/node_exporter/textfile_collector"
VALIDATOR_PROM_FILE = f"{TEXTFILE_DIR}/fmcluster_node_validation.prom"
EFA_PROM_FILE = f"{TEXTFILE_DIR}/fmcluster_efa.prom"
SLURM_PROM_FILE = f"{TEXTFILE_DIR}/fmcluster_slurm.prom"

NODE_EXPORTER_PORT = 9100
DCGM_EXPORTER_PORT = 9400
AGENT_PORT = 9090

