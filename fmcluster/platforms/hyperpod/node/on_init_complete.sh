#!/bin/bash
# fmcluster: SageMaker HyperPod (Slurm) OnInitComplete lifecycle script. HyperPod runs it after its own setup: Slurm
# is configured and running, and a file system given in InstanceStorageConfigs is mounted. README.md beside this file
# says what HyperPod does itself, what this script does, and why; fmcluster.runtime.node_setup makes every decision,
# this script does the side effects.
#
# Layout it runs from (README.md beside this file, "How a node gets this runtime"): HyperPod runs the group's fixed
# entry on_init_complete.<group>.sh (OnInitComplete), which reads the group's pointer, checks the runtime's sha256, unpacks it under
# /var/lib/fmcluster/boot/<group>/ and execs this script with --group G:
#   fmcluster_parameters.json       from the pointer
#   profiles/<instance group>.json  the group's NodeProfile, from the pointer (groups with boot validation)
#   pkg/fmcluster/runtime/...       the runtime package, runtime/<sha256>.zip unpacked (this folder in it at
#                                   platforms/hyperpod/node/)
#
# Steps, in order (a marker per step under /var/lib/fmcluster/lifecycle makes a rerun skip finished ones):
#   runtime     copy the runtime, profiles and parameters to /opt/fmcluster (stable; units refer to it)
#   apt-locks   wait for apt/dpkg locks (boot-time unattended upgrades) up to a deadline
#   role        controller | login | compute, group, partition: the group from --group (resource_config.json, when
#               HyperPod wrote one, must agree and adds the addresses); without --group, found in resource_config.json
#   job-map     with observability: the Slurm Prolog/Epilog hooks of dcgm-exporter's GPU -> job map on every node;
#               with gpu_job_map the controller names them in slurm.conf (Prolog/Epilog only, never a partition)
#               and reconfigures
#   <entry>     one step per store with an entry of its own in the parameters, named by its key: the store's
#               node/lifecycle.sh mounts what HyperPod does not (and may pin its client). A failed mount is judged
#               by validation.policy (the boot validator on GPU workers, this step elsewhere)
#   containers  docker data-root and enroot paths on the instance NVMe (fallback: /opt/sagemaker; never /)
#   mounts      the other stores HyperPod does not mount (the parameters' list, e.g. Mountpoint for Amazon S3): each
#               store's script (its client's install, its mount) under a timeout, a failure judged as an entry's; after
#               containers, which waits for the NVMe a store may cache on
#   users       create the users from the parameters with fixed uids (idempotent)
#   collectors  node_exporter / dcgm-exporter / Prometheus agent via observability/install.sh (never fatal)
#   slurm       check only: HyperPod's API-driven configuration owns the partitions and the daemons
#   validate    GPU workers: boot validator through node_bootstrap.sh with the group's profile
#
# Environment (tests; all optional): FMCLUSTER_LIFECYCLE_ROOT prefixes every node path written or read
# (/opt, /etc, /var, /proc), SAGEMAKER_RESOURCE_CONFIG_PATH, FMCLUSTER_PARAMS, FMCLUSTER_NODE_IP (this node's
# address instead of discovering it), FMCLUSTER_APT_LOCK_TIMEOUT (s, default 900), FMCLUSTER_NVME_WAIT (s, 180),
# FMCLUSTER_RETRY_DELAY (first backoff delay, s, default 5), FMCLUSTER_MOUNT_TIMEOUT (s per listed mount, 2400).
# Exit status: 0 done; 1 with one line "fmcluster lifecycle FAILED at step S: reason" (HyperPod reports it).
set -Eeuo pipefail

GROUP=""
while (($#)); do
  case "$1" in
    --group)
      GROUP="${2:-}"
      shift 2 || { echo "--group needs a value" >&2; exit 2; }
      ;;
    *)
      shift  # HyperPod may pass arguments of its own; none concern us
      ;;
  esac
done

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RESOURCE_CONFIG="${SAGEMAKER_RESOURCE_CONFIG_PATH:-${FMCLUSTER_LIFECYCLE_ROOT:-}/opt/ml/config/resource_config.json}"
APT_LOCK_TIMEOUT="${FMCLUSTER_APT_LOCK_TIMEOUT:-900}"
export DEBIAN_FRONTEND=noninteractive
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$HERE/common.sh"

# --- steps ------------------------------------------------------------------------------------------------------

APT_LOCKS=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock)

held_apt_lock() {
  local f
  for f in "${APT_LOCKS[@]}"; do
    if [[ -e "$ROOT$f" ]] && fuser "$ROOT$f" >/dev/null 2>&1; then
      echo "$f"
      return 0
    fi
  done
  return 1
}

step_apt_locks() {
  if ! command -v fuser >/dev/null 2>&1; then
    log "fuser not found: cannot see apt/dpkg lock holders; continuing (apt-mark waits on the lock itself)"
    return 0
  fi
  local deadline=$((SECONDS + APT_LOCK_TIMEOUT)) lock
  while lock="$(held_apt_lock)"; do
    if ((SECONDS >= deadline)); then
      fail "$lock still held after ${APT_LOCK_TIMEOUT}s (unattended-upgrades or another apt run); rerun once it finishes"
    fi
    log "waiting for $lock (held by another apt/dpkg process)"
    sleep 5
  done
  log "no apt/dpkg lock held"
}

step_role() {
  local args=(whoami --params "$PARAMS" --root "${ROOT:-/}") out
  if [[ -n "$GROUP" ]]; then
    args+=(--group "$GROUP")
  fi
  # AWS documents no resource_config.json for OnInitComplete, and its samples treat a missing one as normal: the
  # group named by the entry script is enough; the file, when present, must agree with it.
  if [[ -f "$RESOURCE_CONFIG" ]]; then
    args+=(--resource-config "$RESOURCE_CONFIG")
  elif [[ -n "$GROUP" ]]; then
    log "no HyperPod resource config at $RESOURCE_CONFIG: instance group $GROUP from the entry script"
  else
    fail "no HyperPod resource config at $RESOURCE_CONFIG and no --group from the entry script"
  fi
  if [[ -n "${FMCLUSTER_NODE_IP:-}" ]]; then
    args+=(--node-ip "$FMCLUSTER_NODE_IP")
  fi
  if ! out="$(node_py "${args[@]}" 2>&1)"; then
    fail "$out"
  fi
  read_node "$out"
  printf '%s\n' "$out" >"$ETC_DIR/node.tsv"
  check_store_entries
  log "role=${NODE[role]} group=${NODE[group]} partition=${NODE[partition]:-none} gpu=${NODE[gpu]} ip=${NODE[node_ip]}"
}

step_job_map() {
  # dcgm-exporter labels a GPU's series with the Slurm job on it from files the Prolog/Epilog write
  # (docs/observability.md, "Profiling fields and job attribution"). Slurm drains a node whose Prolog is missing, so
  # the hooks are written as soon as the role is known, on every node; the controller then adds Prolog= and Epilog=
  # to slurm.conf (unless it sets them already) and has Slurm read it again. Never fatal: without them jobs are
  # attributed per node.
  if [[ "${NODE[observability]}" != 1 ]]; then
    log "no observability: no GPU job map"
    return 0
  fi
  local job_map=(env PYTHONPATH="$FMCLUSTER_HOME/pkg" timeout --kill-after=5 60 python3 -m
    fmcluster.runtime.observability.slurm_job_map) out
  if ! "${job_map[@]}" hooks --hook-dir "$FMCLUSTER_HOME/slurm" >/dev/null; then
    log "WARNING: Slurm job-map hooks not written (rerun to retry)"
    STEP_MARK=0
    return 0
  fi
  [[ "${NODE[role]}" == controller ]] || return 0
  if [[ "${NODE[gpu_job_map]}" != 1 ]]; then
    log "gpu_job_map off: hooks written, not registered in slurm.conf"
    return 0
  fi
  local conf="$ROOT/opt/slurm/etc/slurm.conf"
  if [[ ! -w "$conf" ]]; then
    log "WARNING: $conf not writable or not there: Slurm jobs are not mapped to GPUs (rerun to retry)"
    STEP_MARK=0
    return 0
  fi
  if ! out="$("${job_map[@]}" register --conf "$conf" --hook-dir "${FMCLUSTER_HOME#"$ROOT"}/slurm")"; then
    log "WARNING: Prolog/Epilog not registered in $conf (rerun to retry)"
    STEP_MARK=0
    return 0
  fi
  if [[ "$out" != changed ]]; then
    log "slurm.conf already names the job-map hooks (or its own Prolog/Epilog)"
  elif timeout --kill-after=5 60 "$ROOT/opt/slurm/bin/scontrol" reconfigure; then
    log "Prolog/Epilog registered in $conf; slurmctld reconfigured"
  else
    log "WARNING: scontrol reconfigure failed: Slurm reads the Prolog/Epilog at slurmctld's next start"
  fi
}

# a store's entry (common.sh STORE_ENTRIES): run_step names the step by the entry's key
step_store_entry() {
  local validator_runs=0
  if [[ "${NODE[role]}" == compute && "${NODE[gpu]}" == 1 ]]; then
    validator_runs=1  # GPU workers run the boot validator
  fi
  "entry_step_$STEP" "$validator_runs" "" slurm
}

step_mounts() {
  local validator_runs=0
  if [[ "${NODE[role]}" == compute && "${NODE[gpu]}" == 1 ]]; then
    validator_runs=1  # GPU workers run the boot validator
  fi
  mount_listed "$validator_runs" ""
}

step_containers() {
  local out base why
  out="$(wait_for_nvme 0)"  # waits only while dlami-nvme.service exists
  base="${out%%$'\t'*}"
  why="${out#*$'\t'}"
  if [[ -z "$base" ]]; then
    if [[ "${NODE[gpu]}" == 1 ]]; then
      fail "no instance NVMe (/opt/dlami/nvme) and no /opt/sagemaker volume: container images would fill the root volume"
    fi
    log "$why: container data roots left unconfigured on this ${NODE[role]} node (no containers expected here)"
    return 0
  fi
  log "container data under $base ($why)"
  install -d -m 0711 "$ROOT$base/docker/data-root"
  install -d -m 1777 "$ROOT$base/enroot" "$ROOT$base/enroot/runtime" "$ROOT$base/enroot/cache" \
    "$ROOT$base/enroot/data" "$ROOT$base/enroot/tmp"
  if [[ "$(node_py docker-config --file "$ROOT/etc/docker/daemon.json" --data-root "$base/docker/data-root")" == changed ]]; then
    log "docker data-root set to $base/docker/data-root"
    if systemctl is-active --quiet docker; then
      retry 3 systemctl restart docker
    fi
  fi
  if [[ -d "$ROOT/etc/enroot" ]]; then
    node_py enroot-config --file "$ROOT/etc/enroot/enroot.conf" --base "$base" >/dev/null
    log "enroot runtime/cache/data/temp paths under $base (pyxis imports through enroot, so it follows)"
  else
    log "enroot not installed (/etc/enroot missing); nothing to point at $base"
  fi
}

step_users() {
  local name uid home shell groups out g
  if [[ "${NODE[users]}" == 0 ]]; then
    log "no users in the parameters"
    return 0
  fi
  out="$(node_py users --params "$PARAMS")"
  while IFS=$'\t' read -r name uid home shell groups; do
    if id -u "$name" >/dev/null 2>&1; then
      [[ "$(id -u "$name")" == "$uid" ]] || fail "user $name exists with uid $(id -u "$name"), parameters say $uid"
      log "user $name (uid $uid) exists"
    else
      getent group "$name" >/dev/null 2>&1 || groupadd -g "$uid" "$name"
      useradd -m -d "$home" -s "$shell" -u "$uid" -g "$name" "$name"
      log "created user $name (uid $uid, home $home)"
    fi
    for g in ${groups//,/ }; do
      if getent group "$g" >/dev/null 2>&1; then
        usermod -aG "$g" "$name"
      else
        log "group $g does not exist on this node; $name not added to it"
      fi
    done
    local keys
    keys="$(node_py user-keys --params "$PARAMS" --name "$name")"
    if [[ -n "$keys" ]]; then
      install -d -m 0700 "$ROOT$home/.ssh"
      printf '%s\n' "$keys" >"$ROOT$home/.ssh/authorized_keys"
      chmod 0600 "$ROOT$home/.ssh/authorized_keys"
      chown -R "$uid:$uid" "$ROOT$home/.ssh"
    fi
  done <<<"$out"
}

step_collectors() {
  if [[ "${NODE[observability]}" != 1 ]]; then
    log "no observability in the parameters"
    return 0
  fi
  local args=(--cluster "${NODE[cluster]}" --region "${NODE[region]}" --remote-write-url "${NODE[remote_write_url]}"
    --scrape-interval "${NODE[scrape_interval]}" --node-group "${NODE[group]}")
  if [[ "${NODE[role]}" == controller ]]; then
    args+=(--slurm-collector)  # Slurm node states: one collector per cluster, on the controller
  fi
  if [[ "${NODE[gpu]}" != 1 ]]; then
    args+=(--no-dcgm)
  fi
  local rc=0
  timeout --kill-after=10 1800 bash "$FMCLUSTER_HOME/pkg/fmcluster/runtime/observability/install.sh" "${args[@]}" || rc=$?
  if ((rc != 0)); then
    log "WARNING: collector install failed (exit $rc); the node continues without metrics (rerun to retry)"
    STEP_MARK=0
  fi
}

step_slurm() {
  # HyperPod writes slurm.conf and its partitions from the API (SlurmConfig per instance group) and owns the
  # daemons; an edit here is drift (SlurmConfigStrategy=Managed blocks UpdateCluster). So: look, never touch.
  local conf="$ROOT/opt/slurm/etc/slurm.conf"
  if [[ ! -r "$conf" ]]; then
    log "$conf not present (yet): HyperPod configures Slurm; nothing for this script to do"
    return 0
  fi
  if [[ "${NODE[role]}" == compute ]] && ! grep -Eq "PartitionName=${NODE[partition]}([[:space:]]|$)" "$conf"; then
    log "WARNING: partition ${NODE[partition]} (from the parameters) is not in $conf; check the instance group's SlurmConfig.PartitionNames"
  else
    log "slurm.conf present; configuration left to HyperPod"
  fi
}

step_validate() {
  if [[ "${NODE[role]}" != compute || "${NODE[gpu]}" != 1 ]]; then
    log "not a GPU worker (${NODE[role]}, gpu=${NODE[gpu]}): boot validator not run"
    return 0
  fi
  run_boot_validator "${NODE[policy]}" ""
  log "boot validator done (see $LOG_DIR/bootstrap.log)"
}

# --- main -------------------------------------------------------------------------------------------------------

log "fmcluster lifecycle on_init_complete from $SRC_PREFIX (log $LOG_DIR/lifecycle.log)"
STEP=runtime
step_runtime
STEP=apt-locks
step_apt_locks
STEP=role
step_role
run_step job-map step_job_map
for entry in ${STORE_ENTRIES[@]+"${STORE_ENTRIES[@]}"}; do
  run_step "$entry" step_store_entry
done
run_step containers step_containers
# after containers, which waits for the instance NVMe: a store's cache there must not land on the root volume below it
run_step mounts step_mounts
run_step users step_users
run_step collectors step_collectors
run_step slurm step_slurm
run_step validate step_validate
STEP=end
log "all steps done (role ${NODE[role]}, group ${NODE[group]})"
