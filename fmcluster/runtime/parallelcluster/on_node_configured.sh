#!/bin/bash
# fmcluster on AWS ParallelCluster: the OnNodeConfigured custom action of the head node and of every queue.
#
# ParallelCluster runs it as root once the node is configured (shared storage mounted) and BEFORE slurmd starts;
# a non-zero exit fails the node's bootstrap: the instance shuts down and ParallelCluster replaces it (policy
# fail). There is no drain: ParallelCluster's clustermgtd replaces a drained static node, so a drain would loop.
# docs/parallelcluster.md has the sources.
#
# Usage (the cluster configuration's Args; every value is free of spaces):
#   on_node_configured.sh --role head|compute --runtime S3_URL --region REGION
#       [--profile-b64 BASE64 --level fast|standard|deep --policy fail|report]       compute nodes
#       [--cluster NAME --remote-write-url URL --scrape-interval S --node-group NAME]        node collectors
# Environment (tests): FMCLUSTER_HOME, FMCLUSTER_LOG_DIR, FMCLUSTER_TEXTFILE_DIR, FMCLUSTER_SYSTEMD_DIR,
#   FMCLUSTER_SLURM_BIN (/opt/slurm/bin), FMCLUSTER_PCLUSTER_DIR (/opt/parallelcluster), FMCLUSTER_ETC
#   (/etc/fmcluster), FMCLUSTER_NODENAME_FILE, FMCLUSTER_ROOT (prefix of /proc, /dev/nvidia0, /etc/docker and
#   /etc/enroot), FMCLUSTER_RETRY_DELAY (10: seconds between fetch attempts, times the attempt).
# Exit: 0 done (a failure under policy report included), 1 unhealthy under policy fail, 2 usage.
set -uo pipefail

home=${FMCLUSTER_HOME:-/opt/fmcluster}
etc=${FMCLUSTER_ETC:-/etc/fmcluster}
log_dir=${FMCLUSTER_LOG_DIR:-/var/log/fmcluster}
textfile_dir=${FMCLUSTER_TEXTFILE_DIR:-/var/lib/node_exporter/textfile_collector}
unit_dir=${FMCLUSTER_SYSTEMD_DIR:-/etc/systemd/system}
slurm_bin=${FMCLUSTER_SLURM_BIN:-/opt/slurm/bin}
pcluster_dir=${FMCLUSTER_PCLUSTER_DIR:-/opt/parallelcluster}
nodename_file=${FMCLUSTER_NODENAME_FILE:-/etc/parallelcluster/slurm_plugin/slurm_nodename}
root=${FMCLUSTER_ROOT:-}
retry_delay=${FMCLUSTER_RETRY_DELAY:-10}

role="" runtime="" region="" profile_b64="" level=standard policy=fail
cluster="" remote_write_url="" scrape_interval=30 node_group=""

usage() {
  sed -n '10,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --role) role="${2:-}"; shift 2 ;;
    --runtime) runtime="${2:-}"; shift 2 ;;
    --region) region="${2:-}"; shift 2 ;;
    --profile-b64) profile_b64="${2:-}"; shift 2 ;;
    --level) level="${2:-}"; shift 2 ;;
    --policy) policy="${2:-}"; shift 2 ;;
    --cluster) cluster="${2:-}"; shift 2 ;;
    --remote-write-url) remote_write_url="${2:-}"; shift 2 ;;
    --scrape-interval) scrape_interval="${2:-}"; shift 2 ;;
    --node-group) node_group="${2:-}"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
done
[[ "$role" == head || "$role" == compute ]] || usage
[[ -n "$runtime" && -n "$region" ]] || usage
if [[ "$role" == compute ]]; then
  [[ -n "$profile_b64" ]] || usage
  case "$level" in fast | standard | deep) ;; *) usage ;; esac
  case "$policy" in fail | report) ;; *) usage ;; esac
fi

install -d -m 0755 "$etc" "$home/pkg/fmcluster" "$log_dir" "$textfile_dir"
exec >>"$log_dir/on-node-configured.log" 2>&1
log() { echo "$(date -Is) fmcluster: $*"; }
log "ParallelCluster OnNodeConfigured: role=$role level=$level policy=$policy"

# The Slurm node name: ParallelCluster sets the short host name to it (and writes it to slurm_nodename).
node_name=$(cat "$nodename_file" 2>/dev/null) || node_name=""
[[ -n "$node_name" ]] || node_name=$(hostname -s)
# Slurm's commands (scontrol, sinfo) and fi_info are not on the default PATH of a unit or of this script.
unit_path="$slurm_bin:/opt/amazon/efa/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The runtime asset (retrying with backoff: the network can still be settling), unpacked as a package.
fetch_runtime() {
  local attempt
  for attempt in 1 2 3 4 5 6; do
    aws s3 cp --only-show-errors --region "$region" "$runtime" "$home/runtime.zip" && break
    [[ "$attempt" -eq 6 ]] && return 1
    sleep $((attempt * retry_delay))
  done
  rm -rf "$home/pkg/fmcluster/runtime"
  "$python" -m zipfile -e "$home/runtime.zip" "$home/pkg/fmcluster/runtime" && touch "$home/pkg/fmcluster/__init__.py"
}

# The runtime needs Python 3.9+ (standard library only); RHEL 8's python3 is older, so look for a newer one.
pick_python() {
  local candidate
  for candidate in python3 python3.12 python3.11 python3.10 python3.9; do
    if command -v "$candidate" >/dev/null \
      && "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

# What fails before the validator can run is a failed validation too. $1: a word naming what failed.
unhealthy() {
  local what="$1"
  shift
  log "node not healthy (boot.$what): $*"
  [[ "$policy" == fail ]] && exit 1
  exit 0
}

python=$(pick_python) || {
  [[ "$role" == compute ]] && unhealthy python "no Python 3.9+ for the fmcluster runtime"
  log "no Python 3.9+ for the fmcluster runtime: no collectors on the head node"
  exit 0
}
fetch_runtime || {
  [[ "$role" == compute ]] && unhealthy runtime "cannot fetch the fmcluster runtime from $runtime"
  log "cannot fetch the fmcluster runtime from $runtime: no collectors on the head node"
  exit 0
}

install_collectors() {
  local args=(--cluster "$cluster" --region "$region" --remote-write-url "$remote_write_url"
    --scrape-interval "$scrape_interval" --node-group "$node_group")
  if [[ "$role" == head ]]; then
    # the head node runs slurmctld: its collector reports Slurm node states; sinfo lives in $slurm_bin
    args+=(--slurm-controller --no-dcgm)
    install -d -m 0755 "$unit_dir/fmcluster-slurm-textfile.service.d"
    printf '[Service]\nEnvironment=PATH=%s\n' "$unit_path" \
      >"$unit_dir/fmcluster-slurm-textfile.service.d/parallelcluster.conf"
  elif [[ ! -e "$root/dev/nvidia0" ]]; then
    args+=(--no-dcgm)
  elif ! command -v docker >/dev/null; then
    # dcgm-exporter runs as a container; without docker the node still reports node and EFA metrics
    log "WARNING: no docker on this AMI: dcgm-exporter (GPU metrics) not installed"
    args+=(--no-dcgm)
  fi
  local rc=0
  PATH="$(dirname "$python"):$PATH" timeout --kill-after=10 1200 \
    bash "$home/pkg/fmcluster/runtime/observability/install.sh" "${args[@]}" || rc=$?
  if ((rc != 0)); then
    log "WARNING: collector install failed (exit $rc); the node continues without metrics"
    return 0
  fi
  # Imds Secured (the default) limits the head node's instance credentials to a few users; the collector signs
  # its remote writes with them (HeadNode-v3 documentation: imds-access.sh --allow USER).
  if [[ "$role" == head && -x "$pcluster_dir/scripts/imds/imds-access.sh" ]]; then
    "$pcluster_dir/scripts/imds/imds-access.sh" --allow fmcluster-metrics \
      || log "WARNING: could not allow fmcluster-metrics to read instance credentials"
  fi
}

# Container images and enroot's sandboxes on the instance NVMe (ParallelCluster mounts it where the node contract
# expects it), as the HyperPod lifecycle does: the root volume never fills with layers.
configure_containers() {
  local out base
  out=$(PYTHONPATH="$home/pkg" "$python" -m fmcluster.runtime.lifecycle.node storage-root --root "${root:-/}") || return 0
  base="${out%%$'\t'*}"
  if [[ -z "$base" ]]; then
    log "${out#*$'\t'}: container data left where the AMI puts it"
    return 0
  fi
  install -d -m 0711 "$root$base/docker/data-root"
  install -d -m 1777 "$root$base/enroot" "$root$base/enroot/runtime" "$root$base/enroot/cache" \
    "$root$base/enroot/data" "$root$base/enroot/tmp"
  if [[ -d "$root/etc/docker" ]]; then
    out=$(PYTHONPATH="$home/pkg" "$python" -m fmcluster.runtime.lifecycle.node docker-config \
      --file "$root/etc/docker/daemon.json" --data-root "$base/docker/data-root") || out=failed
    log "docker data-root under $base: $out"
    if [[ "$out" == changed ]] && systemctl is-active --quiet docker; then
      systemctl restart docker || log "WARNING: docker did not restart with its new data-root"
    fi
  fi
  if [[ -d "$root/etc/enroot" ]]; then
    out=$(PYTHONPATH="$home/pkg" "$python" -m fmcluster.runtime.lifecycle.node enroot-config \
      --file "$root/etc/enroot/enroot.conf" --base "$base") || out=failed
    log "enroot paths under $base: $out"
  fi
}
if [[ "$role" == compute ]]; then
  configure_containers
fi

if [[ -n "$remote_write_url" ]]; then
  install_collectors
fi
if [[ "$role" == head ]]; then
  log "head node done"
  exit 0
fi

profile="$etc/profile.json"
printf '%s' "$profile_b64" | base64 -d >"$profile" || unhealthy profile "the NodeProfile argument is not base64"

validate() {
  # $1: policy; the Slurm checks look the node up by its Slurm name with ParallelCluster's scontrol
  local run_policy="$1"
  shift
  PATH="$slurm_bin:/opt/amazon/efa/bin:$PATH" PYTHONPATH="$home/pkg" timeout --kill-after=10 1900 "$python" -m fmcluster.runtime.validate \
    --profile "$profile" --level "$level" --format json --prom "$textfile_dir/fmcluster_node_validation.prom" \
    --policy "$run_policy" --node-name "$node_name" "$@"
}

# slurmd is not running yet, and the node's Slurm state belongs to ParallelCluster until it resumes the node:
# neither can be checked here.
validate report --skip orch.agent --skip orch.slurm_node >"$log_dir/validate.json"
status=$?
if [[ "$status" -eq 0 ]]; then
  log "node validation passed"
  exit 0
fi
log "node validation failed (exit $status); see $log_dir/validate.json"

if [[ "$policy" == fail ]]; then
  log "policy fail: exit 1, ParallelCluster replaces the instance"
  exit 1
fi
exit 0
