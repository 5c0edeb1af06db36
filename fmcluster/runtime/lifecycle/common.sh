#!/bin/bash
# fmcluster: what both HyperPod lifecycle scripts share (on_init_complete.sh for Slurm, on_create_eks.sh for EKS),
# sourced by them, never run alone. The caller sets HERE (its own directory) before sourcing.
#
#   paths       SRC_PKG/SRC_PREFIX (the downloaded S3 prefix), ROOT (FMCLUSTER_LIFECYCLE_ROOT prefixes every node
#               path, for tests), LOG_DIR, STATE_DIR (step markers), FMCLUSTER_HOME, ETC_DIR, PARAMS_SRC, PARAMS
#   log/fail    one line per event; a failure ends with "fmcluster lifecycle FAILED at step S: reason" and exit 1
#   retry       retry ATTEMPTS CMD... with doubling delays from FMCLUSTER_RETRY_DELAY (s, default 5)
#   run_step    NAME FUNCTION: once per node (a marker per step; STEP_MARK=0 leaves it to the next run)
#   node_py     the decisions (lifecycle/node.py) from the stable runtime copy
#   step_runtime  copy the runtime, profiles and parameters to /opt/fmcluster (systemd units refer to that copy)
# shellcheck shell=bash disable=SC2034

SRC_PKG="$(cd "$HERE/../../.." && pwd)"   # …/pkg (holds fmcluster/)
SRC_PREFIX="$(cd "$SRC_PKG/.." && pwd)"   # the downloaded S3 prefix
ROOT="${FMCLUSTER_LIFECYCLE_ROOT:-}"
ROOT="${ROOT%/}"
LOG_DIR="$ROOT/var/log/fmcluster"
STATE_DIR="$ROOT/var/lib/fmcluster/lifecycle"
FMCLUSTER_HOME="$ROOT/opt/fmcluster"
ETC_DIR="$ROOT/etc/fmcluster"
PARAMS_SRC="${FMCLUSTER_PARAMS:-$SRC_PREFIX/fmcluster_parameters.json}"
PARAMS="$ETC_DIR/fmcluster_parameters.json"
NVME_WAIT="${FMCLUSTER_NVME_WAIT:-180}"
RETRY_DELAY="${FMCLUSTER_RETRY_DELAY:-5}"

mkdir -p "$LOG_DIR" "$STATE_DIR"
exec > >(tee -a "$LOG_DIR/lifecycle.log") 2>&1
TEE_PID=$!

STEP=start
STEP_MARK=1
declare -A NODE=()

log() { printf '%s fmcluster-lifecycle [%s] %s\n' "$(date -Is)" "$STEP" "$*"; }
fail() {
  trap - ERR
  printf 'fmcluster lifecycle FAILED at step %s: %s\n' "$STEP" "$*" >&2
  exit 1
}
finish() {
  local rc=$?
  exec >&- 2>&-
  wait "$TEE_PID" 2>/dev/null || true
  exit "$rc"
}
trap 'fail "command failed (exit $?) at line $LINENO: $BASH_COMMAND"' ERR
trap finish EXIT

# retry ATTEMPTS CMD...: run CMD until it succeeds, doubling the delay from $RETRY_DELAY s between tries.
retry() {
  local attempts=$1 n=1 delay=$RETRY_DELAY
  shift
  until "$@"; do
    if ((n >= attempts)); then
      log "gave up after $attempts attempts: $*"
      return 1
    fi
    log "attempt $n/$attempts failed: $*; retrying in ${delay}s"
    sleep "$delay"
    n=$((n + 1))
    delay=$((delay * 2))
  done
}

# run_step NAME FUNCTION: run FUNCTION once per node; a marker records success (a step sets STEP_MARK=0 to be
# retried on the next run, e.g. after a non-fatal failure).
run_step() {
  STEP=$1
  STEP_MARK=1
  if [[ -e "$STATE_DIR/$1.done" ]]; then
    log "already done ($(cat "$STATE_DIR/$1.done")); skipping"
    return 0
  fi
  log "start"
  "$2"
  if [[ "$STEP_MARK" -eq 1 ]]; then
    date -Is >"$STATE_DIR/$1.done"
  fi
  log "end"
}

node_py() { PYTHONPATH="$FMCLUSTER_HOME/pkg" python3 -m fmcluster.runtime.lifecycle.node "$@"; }

# read_node OUTPUT: key<TAB>value lines (node.py's answers) into NODE
read_node() {
  local key value
  while IFS=$'\t' read -r key value; do
    NODE[$key]="$value"
  done <<<"$1"
}

step_runtime() {
  [[ -f "$PARAMS_SRC" ]] || fail "provisioning parameters not found at $PARAMS_SRC"
  install -d -m 0755 "$FMCLUSTER_HOME/pkg" "$FMCLUSTER_HOME/profiles" "$ETC_DIR"
  if [[ ! "$SRC_PKG" -ef "$FMCLUSTER_HOME/pkg" ]]; then
    rm -rf "$FMCLUSTER_HOME/pkg/fmcluster"
    cp -a "$SRC_PKG/fmcluster" "$FMCLUSTER_HOME/pkg/fmcluster"
    touch "$FMCLUSTER_HOME/pkg/fmcluster/__init__.py"
    if [[ -d "$SRC_PREFIX/profiles" ]]; then
      cp -a "$SRC_PREFIX/profiles/." "$FMCLUSTER_HOME/profiles/"
    fi
  fi
  if [[ ! "$PARAMS_SRC" -ef "$PARAMS" ]]; then
    install -m 0644 "$PARAMS_SRC" "$PARAMS"
  fi
  log "runtime in $FMCLUSTER_HOME (from $SRC_PREFIX)"
}

# wait_for_nvme: the instance store mounted at /opt/dlami/nvme, waiting up to $NVME_WAIT s for dlami-nvme.service
# (it formats and mounts the disks at boot; lifecycle scripts can start before it ends). Prints "BASE<TAB>why" from
# node.py storage-root: the NVMe, else HyperPod's /opt/sagemaker volume, else an empty BASE.
wait_for_nvme() {
  local deadline=$((SECONDS + NVME_WAIT)) out
  while :; do
    out="$(node_py storage-root --root "${ROOT:-/}")"
    [[ "${out%%$'\t'*}" == /opt/dlami/nvme ]] && break
    if ! systemctl cat dlami-nvme.service >/dev/null 2>&1 || ((SECONDS >= deadline)); then
      break
    fi
    log "waiting for dlami-nvme.service to mount the instance NVMe" >&2
    sleep 5
  done
  printf '%s\n' "$out"
}
