"""The post-training jobs as shell scripts, for the kinds that run jobs under Slurm or on their hosts: a Ray cluster
started inside the Slurm allocation (the head on the first node, a worker on each other node, each by `srun`, then
the driver on the head: Ray's "Deploying on Slurm" and veRL's examples/slurm/ray_on_slurm.slurm), or over SSH from a
host file where there is no scheduler; SFT as one `trl sft` per node. Each node runs the job's image through Pyxis
(`srun --container-image`) where Slurm has it, else Docker (both on the images the kinds boot; docs/post-training.md).
"""

from __future__ import annotations

import shlex
from typing import List, Sequence

from fmcluster.runtime.observability import RAY_METRICS_PORT

# Ray's ports (Ray docs, "Ports configurations"): the GCS on the head, the dashboard and job API on the head, and a
# fixed metrics port on every node (its default is random) where the node collectors scrape it.
GCS_PORT, DASHBOARD_PORT, METRICS_PORT = 6379, 8265, RAY_METRICS_PORT



def dashboard_lines(*, slurm: bool) -> List[str]:
    """How a person reaches Ray's dashboard and job API on the head node, through the way in the kind already has
    (docs/access.md): Session Manager port forwarding, through the node a session lands on (Slurm kinds: login or
    head node, which shares the nodes' security group) to the Ray head, or straight to the head instance (no
    scheduler)."""
    forward = ("aws ssm start-session --target <the stack's SessionCommand target (PCS: LoginSessionCommand)> --document-name "
               "AWS-StartPortForwardingSessionToRemoteHost" if slurm else
               "aws ssm start-session --target <the head's instance id> --document-name AWS-StartPortForwardingSession")
    where = f"host=<the head's address>,portNumber={DASHBOARD_PORT}" if slurm else f"portNumber={DASHBOARD_PORT}"
    return [f"Ray's dashboard and job API are on the head node's port {DASHBOARD_PORT}; from your machine, through "
            "Session Manager (docs/access.md):",
            f"  {forward} \\",
            f"    --parameters {where},localPortNumber={DASHBOARD_PORT}",
            f"  then http://localhost:{DASHBOARD_PORT} (dashboard) and `ray job list --address "
            f"http://localhost:{DASHBOARD_PORT}` (job API)"]


_RUNNER = r'''# the container runtime: Pyxis (srun --container-image) where Slurm has it, else Docker on the node
if [ -n "${SLURM_JOB_ID:-}" ] && srun --help 2>&1 | grep -q -- '--container-image'; then
  CONTAINER=(--container-image="$IMAGE" --container-mounts="$MOUNT:$MOUNT" --no-container-mount-home)
  RUN=()
else
  CONTAINER=()
  RUN=(docker run --rm --init --gpus all --network host --ipc host --ulimit memlock=-1 --device /dev/infiniband
       --shm-size 64g -v "$MOUNT:$MOUNT" -e HF_HOME -e SLURM_NODEID "$IMAGE")
fi'''


def sbatch_header(*, job: str, partition: str, nodes: int, minutes: int, requeue: bool) -> List[str]:
    lines = [f"#SBATCH --job-name={job}", f"#SBATCH --partition={partition}", f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1", "#SBATCH --exclusive", f"#SBATCH --time={minutes // 60:02d}:{minutes % 60:02d}:00",
             "#SBATCH --output=%x_%j.out", "#SBATCH --open-mode=append"]
    if requeue:
        lines.append("#SBATCH --requeue")  # a failed node puts the job back in the queue; it resumes from the shared file system
    return lines


def ray_slurm(*, header: Sequence[str], sbatch: Sequence[str], image: str, mount: str, gpus: int, install: str,
              prepare: Sequence[str], train: str) -> str:
    """An sbatch script: Ray's head on the job's first node, a worker on every other, the driver on the head."""
    start = f"{install} && ulimit -n 65536 && ray start --block --num-gpus {gpus} --metrics-export-port {METRICS_PORT}"
    driver = "; ".join(["set -euo pipefail", *prepare, train])
    body = f'''set -euo pipefail
IMAGE="${{IMAGE:-{image}}}"
MOUNT="{mount}"
export HF_HOME="$MOUNT/posttraining/hf"
{_RUNNER}
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_node="${{nodes[0]}}"
head_ip="$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address | awk '{{print $1}}')"
export RAY_ADDRESS="$head_ip:{GCS_PORT}"
echo "Ray head on $head_node ($RAY_ADDRESS); dashboard and job API at http://$head_ip:{DASHBOARD_PORT}"
srun --nodes=1 --ntasks=1 -w "$head_node" "${{CONTAINER[@]}}" "${{RUN[@]}}" bash -c \\
  "{start} --head --node-ip-address=$head_ip --port={GCS_PORT} --dashboard-host=0.0.0.0 --dashboard-port={DASHBOARD_PORT}" &
sleep 30
for node in "${{nodes[@]:1}}"; do
  srun --nodes=1 --ntasks=1 -w "$node" "${{CONTAINER[@]}}" "${{RUN[@]}}" bash -c "{start} --address=$RAY_ADDRESS" &
done
sleep 30
# the driver, on the head node beside its Ray node; it connects to the cluster through RAY_ADDRESS
srun --overlap --nodes=1 --ntasks=1 -w "$head_node" "${{CONTAINER[@]}}" "${{RUN[@]}}" env RAY_ADDRESS="$RAY_ADDRESS" \\
  bash -c {shlex.quote(driver)}
'''
    return "\n".join(["#!/bin/bash", *(f"# {h}" if h else "#" for h in header), *sbatch, body])


def _hosts_preamble(*, image: str, mount: str, nodes: int, rerun: str) -> str:
    """What both host-file scripts start with: the image and mount, the hosts (exactly the `nodes` the job was written
    for: the trainer's node count is in its command), `on` to run words on a host over SSH, the head's address, and
    the Docker command every node runs in."""
    return f'''set -euo pipefail
IMAGE="${{IMAGE:-{image}}}"
MOUNT="{mount}"
: "${{HOSTFILE:?HOSTFILE names the nodes, one a line; the first is the head}}"
mapfile -t nodes < <(grep -v '^#' "$HOSTFILE" | awk 'NF {{print $1}}')
if [ "${{#nodes[@]}}" -ne {nodes} ]; then
  echo "HOSTFILE names ${{#nodes[@]}} hosts; this job is written for {nodes}: {rerun} --nodes ${{#nodes[@]}}" >&2
  exit 2
fi
# a command on a node over SSH, each word quoted here for the node's shell (so it expands here, on purpose)
# shellcheck disable=SC2029
on() {{ local host="$1"; shift; ssh "$host" "$(printf '%q ' "$@")"; }}
head_ip="$(ssh "${{nodes[0]}}" hostname --ip-address | awk '{{print $1}}')"
RUN=(docker run --rm --init --gpus all --network host --ipc host --ulimit memlock=-1 --device /dev/infiniband
     --shm-size 64g -v "$MOUNT:$MOUNT" -e "HF_HOME=$MOUNT/posttraining/hf" "$IMAGE")'''


def ray_hosts(*, header: Sequence[str], image: str, mount: str, gpus: int, nodes: int, rerun: str, install: str,
              prepare: Sequence[str], train: str) -> str:
    """The same over SSH from HOSTFILE (one host a line, the first the head), for clusters without a scheduler. `on`
    quotes each word for the node's shell (printf %q), so what runs there is what runs under Slurm, word for word."""
    start = f"{install} && ulimit -n 65536 && ray start --block --num-gpus {gpus} --metrics-export-port {METRICS_PORT}"
    driver = "; ".join(["set -euo pipefail", *prepare, train])
    body = f'''{_hosts_preamble(image=image, mount=mount, nodes=nodes, rerun=rerun)}
RAY_ADDRESS="$head_ip:{GCS_PORT}"
echo "Ray head on ${{nodes[0]}} ($RAY_ADDRESS); dashboard and job API at http://$head_ip:{DASHBOARD_PORT}"
on "${{nodes[0]}}" "${{RUN[@]}}" bash -c \\
  "{start} --head --node-ip-address=$head_ip --port={GCS_PORT} --dashboard-host=0.0.0.0 --dashboard-port={DASHBOARD_PORT}" &
sleep 30
for node in "${{nodes[@]:1}}"; do
  on "$node" "${{RUN[@]}}" bash -c "{start} --address=$RAY_ADDRESS" &
done
sleep 30
# the driver, on the head node beside its Ray node; it connects to the cluster through RAY_ADDRESS
on "${{nodes[0]}}" "${{RUN[@]}}" env RAY_ADDRESS="$RAY_ADDRESS" bash -c {shlex.quote(driver)}
'''
    return "\n".join(["#!/bin/bash", *(f"# {h}" if h else "#" for h in header), body])


def sft_slurm(*, header: Sequence[str], sbatch: Sequence[str], image: str, mount: str, install: str,
              config_path: str, config_text: str, launch: Sequence[str]) -> str:
    """An sbatch script: the config written once to shared storage, then one `trl sft` per node (rank SLURM_NODEID)."""
    # the rank expands in each task (\\$SLURM_NODEID), the head's address here
    line = " ".join({"$SLURM_NODEID": "\\$SLURM_NODEID", "$head_ip": "$head_ip"}.get(a, shlex.quote(a)) for a in launch)
    body = f'''set -euo pipefail
IMAGE="${{IMAGE:-{image}}}"
MOUNT="{mount}"
export HF_HOME="$MOUNT/posttraining/hf"
{_RUNNER}
mkdir -p "$(dirname {shlex.quote(config_path)})"
cat > {shlex.quote(config_path)} <<'CONFIG'
{config_text.rstrip()}
CONFIG
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_ip="$(srun --nodes=1 --ntasks=1 -w "${{nodes[0]}}" hostname --ip-address | awk '{{print $1}}')"
srun --kill-on-bad-exit=1 "${{CONTAINER[@]}}" "${{RUN[@]}}" bash -c "{install} && {line}"
'''
    return "\n".join(["#!/bin/bash", *(f"# {h}" if h else "#" for h in header), *sbatch, body])


def sft_hosts(*, header: Sequence[str], image: str, mount: str, nodes: int, rerun: str, install: str,
              config_path: str, config_text: str, launch: Sequence[str]) -> str:
    """The same over SSH from HOSTFILE, for clusters without a scheduler: the config written once through the first
    host onto the shared file system, then one `trl sft` per host (rank: its line in the file), all waited for."""
    # the rank and the head's address expand here, per host
    line = " ".join({"$rank": "$rank", "$head_ip": "$head_ip"}.get(a, shlex.quote(a)) for a in launch)
    config_dir = shlex.quote(config_path.rsplit("/", 1)[0])
    body = f'''{_hosts_preamble(image=image, mount=mount, nodes=nodes, rerun=rerun)}
on "${{nodes[0]}}" mkdir -p {config_dir}
ssh "${{nodes[0]}}" "cat > {shlex.quote(config_path)}" <<'CONFIG'
{config_text.rstrip()}
CONFIG
pids=()
for rank in "${{!nodes[@]}}"; do
  on "${{nodes[$rank]}}" "${{RUN[@]}}" bash -c "{install} && {line}" &
  pids+=("$!")
done
status=0
for pid in "${{pids[@]}}"; do wait "$pid" || status=1; done
exit "$status"
'''
    return "\n".join(["#!/bin/bash", *(f"# {h}" if h else "#" for h in header), body])
