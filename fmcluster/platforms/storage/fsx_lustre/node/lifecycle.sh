#!/bin/bash
# fmcluster: FSx for Lustre's step in HyperPod's lifecycle scripts, sourced by them (platforms/hyperpod/node/common.sh
# finds every store's node/lifecycle.sh by layout), never run alone. It adds its entry's key to STORE_ENTRIES (the
# step's name and marker, the key node/lifecycle.py reads) and defines entry_step_<key> VALIDATOR_RUNS NOTE MANAGER,
# which the scripts run as that step with common.sh's log, retry, mount_failed and NODE (node/lifecycle.py's answers).
# shellcheck shell=bash
STORE_ENTRIES+=(fsx)

# Only where the parameters carry the entry (on Slurm an EFA-enabled file system: HyperPod mounts the others itself,
# over TCP). The helper retries with backoff, is idempotent and proves the mount answers; one call is enough.
entry_step_fsx() {
  local validator_runs="$1" note="$2" manager="$3"
  if [[ "${NODE[fsx]}" != 1 ]]; then
    log "no FSx for Lustre in the parameters; nothing to mount"
    return 0
  fi
  local mp="${NODE[fsx_mount_point]}" args
  args=(mount --dns-name "${NODE[fsx_dns_name]}" --mount-name "${NODE[fsx_mount_name]}" --mount-point "$mp" --fstab)
  if [[ "${NODE[fsx_efa]}" == 1 ]]; then
    args+=(--efa)  # LNet over EFA: only this helper sets it up
  fi
  if ! PYTHONPATH="$FMCLUSTER_HOME/pkg" timeout --kill-after=10 1200 \
      python3 -m fmcluster.runtime.lustre "${args[@]}"; then
    mount_failed "$validator_runs" "$note" \
      "cannot mount FSx for Lustre ${NODE[fsx_dns_name]}@tcp:/${NODE[fsx_mount_name]} at $mp (lustre helper failed; see the lines above)"
    return 0
  fi
  log "FSx for Lustre mounted at $mp"
  [[ "$manager" == slurm ]] || return 0
  # Slurm's Ubuntu image: unattended upgrades that move the kernel or the Lustre client break the mount on the next
  # boot (Amazon Linux 2023 on EKS has no apt-mark, and dnf versionlock is a plugin the image may not have)
  local pkgs=() p
  for p in "lustre-client-modules-$(uname -r)" lustre-client-utils "linux-image-$(uname -r)"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      pkgs+=("$p")
    fi
  done
  if ((${#pkgs[@]})); then
    step_apt_locks
    retry 4 apt-mark hold "${pkgs[@]}"
    log "held ${pkgs[*]} against unattended upgrades"
  fi
}
