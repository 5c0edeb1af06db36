#!/bin/bash
# One torchrun per node for train.py (beside this file), its rendezvous on the first node of the allocation as it
# is when this step starts: under Slurm the job's node list (a requeued or auto-resumed job may run on replaced
# nodes), else the first line of HOSTFILE. Arguments after the script go to train.py.
#
#   Slurm: srun [--auto-resume=1] launch.sh --tier fsx --durable /fsx/checkpoints/RUN ...
#   none:  HOSTFILE=hosts RUN=name launch.sh --tier nvme --durable ... --local ...   (on every node)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TORCHRUN="${TORCHRUN:-torchrun}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
RDZV_PORT="${RDZV_PORT:-29500}"

if [ -n "${SLURM_JOB_ID:-}" ]; then
  NODES="${SLURM_JOB_NUM_NODES:?srun sets SLURM_JOB_NUM_NODES}"
  # awk reads to the end: `| head -n 1` would close the pipe early and, under pipefail, fail on scontrol's SIGPIPE
  HEAD="$(scontrol show hostnames "${SLURM_JOB_NODELIST:?srun sets SLURM_JOB_NODELIST}" | awk 'NR == 1')"
  RDZV_ID="$SLURM_JOB_ID"
else
  : "${HOSTFILE:?without Slurm, HOSTFILE must name the nodes (one per line, the rendezvous host first)}"
  : "${RUN:?without Slurm, RUN names the run (the same on every node)}"
  NODES="$(grep -c . "$HOSTFILE" || true)"  # grep -c exits 1 on no match; the check below reports it
  HEAD="$(awk 'NF {print $1; exit}' "$HOSTFILE")"
  RDZV_ID="$RUN"
fi
if [ -z "$HEAD" ]; then
  echo "launch.sh: no rendezvous host (empty node list)" >&2
  exit 2
fi

exec "$TORCHRUN" --nnodes="$NODES" --nproc-per-node="$GPUS_PER_NODE" \
  --rdzv-backend=c10d --rdzv-endpoint="$HEAD:$RDZV_PORT" --rdzv-id="$RDZV_ID" \
  "$HERE/train.py" "$@"
