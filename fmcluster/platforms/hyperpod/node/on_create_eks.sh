#!/bin/bash
# fmcluster: SageMaker HyperPod on EKS OnCreate lifecycle script. HyperPod runs it when it creates a node, before the
# node's containerd and kubelet join the EKS cluster (AWS's sample scripts rewrite containerd's configuration and move
# /var/lib/kubelet here without restarting either); HyperPod itself joins the node. README.md beside this file says
# what HyperPod does, what this script does, and why; fmcluster.runtime.node_setup makes every decision, this script
# does the side effects.
#
# Layout it runs from (README.md beside this file, "How a node gets this runtime"): HyperPod runs the group's fixed
# entry on_create.<group>.sh (OnCreate), which reads the group's pointer, checks the runtime's sha256, unpacks it under
# /var/lib/fmcluster/boot/<group>/ and execs this script with --group G:
#   fmcluster_parameters.json       from the pointer
#   profiles/<instance group>.json  the group's NodeProfile, from the pointer (groups with boot validation)
#   pkg/fmcluster/runtime/...       the runtime package, runtime/<sha256>.zip unpacked (this folder in it at
#                                   platforms/hyperpod/node/)
#
# Steps, in order (a marker per step under /var/lib/fmcluster/lifecycle makes a rerun skip finished ones):
#   runtime       copy the runtime, profiles and parameters to /opt/fmcluster (stable; units refer to it)
#   role          this node's group (from --group), GPU or not, and its settings
#   containers    containerd's root, the kubelet's root (pods' emptyDirs) and pod logs on the instance NVMe (fallback:
#                 /opt/sagemaker; never the root volume on GPU nodes), as bind mounts with fstab entries; a GPU type
#                 with instance store waits for the NVMe's mount itself and, when it never comes, says so (policy
#                 fail: fails); what an earlier node or image left in the target directories is removed first
#   <entry>       one step per store with an entry of its own in the parameters, named by its key: the store's
#                 node/lifecycle.sh mounts it on the node; a failed mount is judged by validation.policy
#   mounts        the other stores (the parameters' list, e.g. Mountpoint for Amazon S3): each store's script under a
#                 timeout, a failure judged as an entry's
#   efa-textfile  the EFA counters' textfile timer on EFA nodes (node-exporter pods read it), with observability
#   validate      GPU nodes: the boot validator through node_bootstrap.sh with the group's profile; it publishes the
#                 result the node gate reads, and fails the script under policy fail
#
# Environment (tests; all optional): FMCLUSTER_LIFECYCLE_ROOT prefixes every node path written or read
# (/opt, /etc, /var, /proc), FMCLUSTER_PARAMS, FMCLUSTER_NVME_WAIT (s, 180), FMCLUSTER_NVME_POLL (s, 5),
# FMCLUSTER_RETRY_DELAY (s, 5), FMCLUSTER_MOUNT_TIMEOUT (s per listed mount, 2400).
# Exit status: 0 done; 1 with one line "fmcluster lifecycle FAILED at step S: reason" (HyperPod reports it and, with
# continuous provisioning, provisions another instance); 2 usage.
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
if [[ -z "$GROUP" ]]; then
  echo "usage: on_create_eks.sh --group INSTANCE_GROUP (the per-group entry stub passes it)" >&2
  exit 2
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh source-path=SCRIPTDIR
source "$HERE/common.sh"

# --- steps ------------------------------------------------------------------------------------------------------

step_role() {
  local out
  if ! out="$(node_py eks-node --params "$PARAMS" --group "$GROUP" 2>&1)"; then
    fail "$out"
  fi
  read_node "$out"
  printf '%s\n' "$out" >"$ETC_DIR/node.tsv"
  check_store_entries
  log "role=${NODE[role]} group=${NODE[group]} gpu=${NODE[gpu]} efa=${NODE[efa]} policy=${NODE[policy]}"
}

step_containers() {
  local out base why name src dst unit missing stopped=()
  out="$(wait_for_nvme "${NODE[nvme_expected]}")"
  base="${out%%$'\t'*}"
  why="${out#*$'\t'}"
  if [[ "${NODE[nvme_expected]}" == 1 && "$base" != /opt/dlami/nvme ]]; then
    missing="${NODE[instance_type]} has instance-store NVMe, but /opt/dlami/nvme is not mounted after ${NVME_WAIT}s"
    if [[ "${NODE[policy]}" == fail ]]; then
      fail "$missing (validation.policy fail: HyperPod provisions another instance)"
    fi
    log "WARNING: $missing: containerd, kubelet and pod data go to ${base:-no separate volume} instead (${why})"
  fi
  if [[ -z "$base" ]]; then
    if [[ "${NODE[gpu]}" == 1 ]]; then
      fail "no instance NVMe (/opt/dlami/nvme) and no /opt/sagemaker volume: images and pod data would fill the root volume"
    fi
    log "$why: containerd and kubelet data stay on the root volume of this ${NODE[role]} node"
    return 0
  fi
  log "containerd, kubelet and pod logs under $base ($why)"
  # dlami-nvme.service (not fstab) mounts the instance store at boot: the bind mounts wait for it
  local after=()
  if [[ "$base" == /opt/dlami/nvme ]] && systemctl cat dlami-nvme.service >/dev/null 2>&1; then
    after=(--after dlami-nvme.service)
  fi
  # HyperPod starts them after this script; if one runs already, move its data while it is stopped
  for unit in kubelet containerd; do
    if systemctl is-active --quiet "$unit"; then
      log "$unit is running: stopping it while its data moves"
      systemctl stop "$unit"
      stopped=("$unit" ${stopped[@]+"${stopped[@]}"})
    fi
  done
  while IFS=$'\t' read -r name src dst; do
    [[ -n "$name" ]] || continue
    if bind_mounted "$src"; then
      log "$name: $src is already a mount point (an earlier run this boot); left as it is"
    else
      # what an earlier node or AMI left on this volume (/opt/sagemaker outlives the root volume across AMI updates):
      # containerd's and the kubelet's state must match this image's, as AWS's sample clears it before moving
      if [[ "$dst" == "$base"/?* && -n "$(ls -A "$ROOT$dst" 2>/dev/null)" ]]; then
        log "$name: removing stale $dst (left on $base by an earlier node or image)"
        rm -rf -- "$ROOT$dst"
      fi
      install -d -m 0711 "$ROOT$dst" "$ROOT$src"
      if [[ -n "$(ls -A "$ROOT$src" 2>/dev/null)" ]]; then
        cp -a "$ROOT$src/." "$ROOT$dst/"  # e.g. images the AMI preloaded into containerd
      fi
      mount --bind "$ROOT$dst" "$ROOT$src"
    fi
    node_py fstab-bind --file "$ROOT/etc/fstab" --source "$dst" --target "$src" --requires "$base" \
      ${after[@]+"${after[@]}"} >/dev/null
    log "$name: $src is $dst (bind mount, in fstab)"
  done <<<"$(node_py container-layout --base "$base")"
  for unit in ${stopped[@]+"${stopped[@]}"}; do
    retry 3 systemctl start "$unit"
  done
}

# bind_mounted PATH: PATH (a node path) is a mount point now (/proc/mounts of the node).
bind_mounted() {
  local target rest
  while read -r _ target rest; do
    [[ "${target//\\040/ }" == "$1" ]] && return 0
  done <"$ROOT/proc/mounts"
  return 1
}

# a store's entry (common.sh STORE_ENTRIES), the step named by its key. GPU nodes run the boot validator; the system
# group's pods mount the store through its CSI driver
step_store_entry() {
  "entry_step_$STEP" "${NODE[gpu]}" " (pods mount it through its CSI driver)" eks
}

step_mounts() {
  mount_listed "${NODE[gpu]}" " (pods mount it through its CSI driver)"
}

step_efa_textfile() {
  if [[ "${NODE[efa_textfile]}" != 1 ]]; then
    log "no EFA counters on this node (no EFA, or no observability)"
    return 0
  fi
  node_py efa-units --unit-dir "$ROOT/etc/systemd/system" >/dev/null
  if ! { systemctl daemon-reload && systemctl enable --now fmcluster-efa-textfile.timer; }; then
    log "WARNING: EFA textfile timer not started; the node continues without EFA counters (rerun to retry)"
    STEP_MARK=0
  fi
}

step_validate() {
  if [[ "${NODE[gpu]}" != 1 ]]; then
    log "not a GPU node (${NODE[role]}): boot validator not run"
    return 0
  fi
  run_boot_validator "${NODE[node_policy]}" ": ${NODE[node_policy]} on the node" \
    FMCLUSTER_STATE_DIR="$ROOT/var/lib/fmcluster"
  log "boot validator done; result published at /var/lib/fmcluster/validation.json (see $LOG_DIR/bootstrap.log)"
}

# --- main -------------------------------------------------------------------------------------------------------

log "fmcluster lifecycle on_create_eks (group $GROUP) from $SRC_PREFIX (log $LOG_DIR/lifecycle.log)"
STEP=runtime
step_runtime
STEP=role
step_role
run_step containers step_containers
for entry in ${STORE_ENTRIES[@]+"${STORE_ENTRIES[@]}"}; do
  run_step "$entry" step_store_entry
done
run_step mounts step_mounts
run_step efa-textfile step_efa_textfile
run_step validate step_validate
STEP=end
log "all steps done (${NODE[role]} node, group ${NODE[group]})"
