#!/bin/bash
# fmcluster: what both HyperPod lifecycle scripts share (on_init_complete.sh for Slurm, on_create_eks.sh for EKS),
# sourced by them, never run alone. The caller sets HERE (its own directory) before sourcing.
#
#   paths       SRC_PKG/SRC_PREFIX (the downloaded S3 prefix), ROOT (FMCLUSTER_LIFECYCLE_ROOT prefixes every node
#               path, for tests), LOG_DIR, STATE_DIR (step markers), FMCLUSTER_HOME, ETC_DIR, PARAMS_SRC, PARAMS
#   log/fail    one line per event; a failure ends with "fmcluster lifecycle FAILED at step S: reason" and exit 1
#   retry       retry ATTEMPTS CMD... with doubling delays from FMCLUSTER_RETRY_DELAY (s, default 5)
#   run_step    NAME FUNCTION: once per node (a marker per step; STEP_MARK=0 leaves it to the next run)
#   node_py     the decisions (python3 -m fmcluster.runtime.node_setup) from the stable runtime copy
#   step_runtime  copy the runtime, profiles and parameters to /opt/fmcluster (systemd units refer to that copy)
#   STORE_ENTRIES  the stores with an entry of their own in the parameters: each store's node/lifecycle.sh (found by
#               layout, sourced here) adds its key and defines entry_step_<key>, run as the step of that name
#   check_store_entries  fail unless every store entry node_setup reads has its step (after the node's answers)
#   mount_failed  a store did not mount: one policy for every store
#   mount_listed  the parameters' list of other stores' mounts, each judged by the same policy
# shellcheck shell=bash disable=SC2034

# The runtime archive carries this folder at its path in the package below fmcluster/runtime/
# (constructs/runtime_archive.py): HERE is …/pkg/fmcluster/runtime/platforms/hyperpod/node.
SRC_PKG="$(cd "$HERE/../../../../.." && pwd)"   # …/pkg (holds fmcluster/)
if [[ ! -f "$SRC_PKG/fmcluster/runtime/node_bootstrap.sh" ]]; then
  echo "fmcluster lifecycle FAILED at step start: no fmcluster runtime at $SRC_PKG (run from the unpacked runtime)" >&2
  exit 1
fi
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
NVME_POLL="${FMCLUSTER_NVME_POLL:-5}"  # s between looks at the mount
RETRY_DELAY="${FMCLUSTER_RETRY_DELAY:-5}"
# one listed mount: its client's install (each download and the install under timeouts of its own) and the mount
MOUNT_TIMEOUT="${FMCLUSTER_MOUNT_TIMEOUT:-2400}"

mkdir -p "$LOG_DIR" "$STATE_DIR"
exec > >(tee -a "$LOG_DIR/lifecycle.log") 2>&1
TEE_PID=$!

STEP=start
STEP_MARK=1
declare -A NODE=()

# The time as `date -Is` writes it (2024-05-01T12:00:00+00:00), from bash's own strftime (printf %(...)T, bash 4.2+):
# no process per log line.
log() {
  local now
  printf -v now '%(%Y-%m-%dT%H:%M:%S%z)T' -1
  printf '%s fmcluster-lifecycle [%s] %s\n' "${now:0:22}:${now:22}" "$STEP" "$*"
}
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

# every answer is a few reads of files under --root: a minute is a hung interpreter, never a slow one
node_py() { PYTHONPATH="$FMCLUSTER_HOME/pkg" timeout --kill-after=5 60 python3 -m fmcluster.runtime.node_setup "$@"; }

# read_node OUTPUT: key<TAB>value lines (node_setup's answers) into NODE
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

# wait_for_nvme [EXPECTED]: the instance store mounted at /opt/dlami/nvme. Prints "BASE<TAB>why" from node_setup
# storage-root: the NVMe, else HyperPod's /opt/sagemaker volume, else an empty BASE. Without EXPECTED (or 0) it waits,
# up to $NVME_WAIT s, only while dlami-nvme.service exists (it formats and mounts the disks at boot; lifecycle scripts
# can start before it ends). EXPECTED=1 (the node's instance type has instance-store NVMe) waits on the mount itself
# for up to $NVME_WAIT s whatever mounts it, as AWS's HyperPod EKS sample waits on its disk: the caller then says
# clearly, or fails, when the NVMe never came.
wait_for_nvme() {
  local expected="${1:-0}" deadline=$((SECONDS + NVME_WAIT)) out unit
  while :; do
    out="$(node_py storage-root --root "${ROOT:-/}")"
    [[ "${out%%$'\t'*}" == /opt/dlami/nvme ]] && break
    ((SECONDS >= deadline)) && break
    if systemctl cat dlami-nvme.service >/dev/null 2>&1; then
      unit=1
    else
      unit=0
      [[ "$expected" == 1 ]] || break
    fi
    if ((unit)); then
      log "waiting for dlami-nvme.service to mount the instance NVMe" >&2
    else
      log "waiting for the instance NVMe to be mounted at /opt/dlami/nvme (no dlami-nvme.service on this image)" >&2
    fi
    sleep "$NVME_POLL"
  done
  printf '%s\n' "$out"
}

# Each store's lifecycle step for its entry in the parameters, from its node folder at its place in the runtime
# (platforms/storage/<store>/node/lifecycle.sh beside this platform's folder). A failed mount is one policy on every
# orchestrator (docs/node-contract.md): where the boot validator runs (VALIDATOR_RUNS=1) its required storage.mounts
# check applies validation.policy; elsewhere mount_failed applies it (NOTE ends the warning under report).
STORE_ENTRIES=()
for store_step in "$HERE"/../../storage/*/node/lifecycle.sh; do
  if [[ -f "$store_step" ]]; then
    # shellcheck source=/dev/null
    source "$store_step"
  fi
done
unset store_step

# check_store_entries: every store entry the runtime reads (node_setup's store_entries answer) has its step here, so a
# store whose lifecycle.sh is not found fails the node rather than leaving its entry unmounted without a word.
check_store_entries() {
  local key keys="${NODE[store_entries]:-}"
  for key in ${keys//,/ }; do
    if ! declare -F "entry_step_$key" >/dev/null; then
      fail "no lifecycle step for the parameters' store entry $key (its node/lifecycle.sh is not in the runtime)"
    fi
  done
}

# mount_failed VALIDATOR_RUNS NOTE WHAT: a store did not mount. Where the boot validator runs its required
# storage.mounts check applies validation.policy; elsewhere it applies here: fail ends the script, else a warning.
# The step is left to the next run either way.
mount_failed() {
  local validator_runs="$1" note="$2" what="$3"
  STEP_MARK=0
  if [[ "$validator_runs" == 1 ]]; then
    log "$what; the boot validator reports it under policy ${NODE[policy]}"
  elif [[ "${NODE[policy]}" == fail ]]; then
    fail "$what; policy fail"
  else
    log "WARNING: $what; policy ${NODE[policy]}: this ${NODE[role]} node continues without it$note"
  fi
}

# mount_listed VALIDATOR_RUNS NOTE: mount the parameters' list of mounts (stores without an entry of their own), in
# order, each script under $MOUNT_TIMEOUT s; a failed one is judged as a store's entry step judges its own
# (mount_failed) and the next is still tried.
mount_listed() {
  local validator_runs="$1" note="$2" out store path script failure rc
  if ! out="$(node_py mounts --params "$PARAMS" --dir "$FMCLUSTER_HOME/mounts" 2>&1)"; then
    fail "$out"
  fi
  if [[ -z "$out" ]]; then
    log "no other stores in the parameters; nothing to mount"
    return 0
  fi
  while IFS=$'\t' read -r store path script failure; do
    log "mounting $store at $path ($script, up to ${MOUNT_TIMEOUT}s)"
    rc=0
    timeout --kill-after=10 "$MOUNT_TIMEOUT" bash "$script" </dev/null || rc=$?  # stdin is the list
    if ((rc == 0)); then
      log "$store mounted at $path"
    elif ((rc == 124 || rc == 137)); then
      mount_failed "$validator_runs" "$note" "$failure: no answer after ${MOUNT_TIMEOUT}s"
    else
      mount_failed "$validator_runs" "$note" "$failure (exit $rc; see the lines above)"
    fi
  done <<<"$out"
}

# run_boot_validator NODE_POLICY NOTE [VAR=value ...]: run node_bootstrap.sh with this node's group profile, the
# parameters' level and NODE_POLICY (what the node itself applies), extra environment after NOTE (said in the log
# line). A non-zero exit (policy fail) fails the step.
run_boot_validator() {
  local node_policy="$1" note="$2"
  shift 2
  local profile="$FMCLUSTER_HOME/profiles/${NODE[group]}.json"
  [[ -f "$profile" ]] || fail "no node profile for group ${NODE[group]} at $profile"
  log "validating with $profile (level ${NODE[level]}, policy ${NODE[policy]}$note)"
  if ! env FMCLUSTER_HOME="$FMCLUSTER_HOME" FMCLUSTER_PROFILE="$profile" FMCLUSTER_LEVEL="${NODE[level]}" \
    FMCLUSTER_POLICY="$node_policy" FMCLUSTER_LOG_DIR="$LOG_DIR" \
    FMCLUSTER_TEXTFILE_DIR="$ROOT/var/lib/node_exporter/textfile_collector" \
    FMCLUSTER_SYSTEMD_DIR="$ROOT/etc/systemd/system" FMCLUSTER_POINTER="$SRC_PREFIX/pointer.json" "$@" \
    bash "$FMCLUSTER_HOME/pkg/fmcluster/runtime/node_bootstrap.sh"; then
    fail "node validation failed under policy ${NODE[policy]}; report in $LOG_DIR/validate.json"
  fi
}
