#!/bin/bash
# Training that resumes from its newest complete checkpoint after a node is replaced, without an orchestrator
# (orchestrator none): run this on every node of HOSTFILE (the same RUN everywhere), e.g. from a systemd unit with
# Restart=on-failure or with pdsh. No scheduler restarts anything here, so this loop does: when a node dies, torchrun
# on the others fails its rendezvous and this script starts it again (up to MAX_ATTEMPTS, PAUSE_S apart) until the
# replacement node runs the script too and the rendezvous completes; train.py then restores the newest complete
# checkpoint under DURABLE_ROOT/RUN. The replacement has a new address: put it in HOSTFILE on every node (keep the
# rendezvous host, the first line, on a node that stays).
#
#   HOSTFILE=/fsx/jobs/hosts RUN=llama-8b bash /fsx/jobs/resume-train-none.sh
#
# Checkpoints (the spec's `checkpoints` section; docs/checkpoints.md): TIER nvme writes to LOCAL_ROOT on the
# instance NVMe (the DLAMI mounts it at /opt/dlami/nvme) and copies each checkpoint to DURABLE_ROOT on FSx in the
# background; TIER fsx writes to DURABLE_ROOT directly.
set -uo pipefail

TIER="${TIER:-nvme}"
DURABLE_ROOT="${DURABLE_ROOT:-/fsx/checkpoints}"
LOCAL_ROOT="${LOCAL_ROOT:-/opt/dlami/nvme/checkpoints}"
INTERVAL_MINUTES="${INTERVAL_MINUTES:-30}"
KEEP="${KEEP:-3}"
MAX_ATTEMPTS="${MAX_ATTEMPTS:-20}"
PAUSE_S="${PAUSE_S:-60}"
RESUME_DIR="${RESUME_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/resume}"
PYTHON="${PYTHON:-python3}"

: "${HOSTFILE:?HOSTFILE must name the nodes, one per line, the rendezvous host first}"
: "${RUN:?RUN names the run, the same on every node}"
export HOSTFILE RUN
args=(--tier "$TIER" --durable "$DURABLE_ROOT/$RUN" --interval-minutes "$INTERVAL_MINUTES" --keep "$KEEP")
if [ "$TIER" = nvme ]; then
  args+=(--local "$LOCAL_ROOT/$RUN")
fi

for attempt in $(seq 1 "$MAX_ATTEMPTS"); do
  if ! latest="$("$PYTHON" "$RESUME_DIR/checkpoint_dir.py" latest "$DURABLE_ROOT/$RUN")"; then
    exit 2  # the checkpoint root cannot be read: retrying would not help
  fi
  echo "attempt $attempt: resuming from ${latest:-the start (no complete checkpoint yet)}"
  "$RESUME_DIR/launch.sh" "${args[@]}"
  status=$?
  if [ "$status" -eq 0 ]; then
    exit 0
  fi
  echo "attempt $attempt ended with status $status; starting again in ${PAUSE_S}s" >&2
  sleep "$PAUSE_S"
done
echo "gave up after $MAX_ATTEMPTS attempts" >&2
exit 1
