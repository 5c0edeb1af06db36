#!/bin/bash
# fmcluster on AWS ParallelCluster: the custom action of every queue (OnNodeConfigured) and of the head node
# (OnNodeConfigured and OnNodeUpdated).
#
# ParallelCluster runs OnNodeConfigured as root once the node is configured (shared storage mounted) and BEFORE
# slurmd starts; a non-zero exit fails the node's bootstrap: the instance shuts down and ParallelCluster replaces
# it (policy fail). There is no drain: ParallelCluster's clustermgtd replaces a drained static node, so a drain
# would loop. OnNodeUpdated runs on the head node after every cluster update; a non-zero exit there fails the
# update, so the head node always exits 0. docs/parallelcluster.md has the sources.
#
# What changes with fmcluster releases or spec edits is not in the arguments (ParallelCluster cannot update the
# head node's, and replaces a queue's nodes when its change): the node reads it from stable keys under SOURCE
# (s3://<bucket>/fmcluster/): on compute nodes groups/<group>.json, one object holding the collectors' settings (with
# the runtime's key and sha256) and the group's profile (whose level and policy are the spec's validation.level and
# validation.policy), on the head node settings.json; then the runtime they name (runtime/<sha256>.zip, checked
# against that digest).
#
# Usage (the cluster configuration's Args; every value is one word):
#   on_node_configured.sh --role head|compute --source S3_PREFIX --region REGION --node-group NAME
#       [--level fast|standard --policy fail|report]             override the profile's (earlier configurations)
#       [--event configured|updated --revision R]                head node: OnNodeUpdated (R names the inputs)
# Environment (tests): FMCLUSTER_HOME, FMCLUSTER_LOG_DIR, FMCLUSTER_TEXTFILE_DIR, FMCLUSTER_SYSTEMD_DIR,
#   FMCLUSTER_SLURM_BIN (/opt/slurm/bin), FMCLUSTER_SLURM_SCRIPTS (/opt/slurm/etc/scripts),
#   FMCLUSTER_PCLUSTER_DIR (/opt/parallelcluster), FMCLUSTER_ETC
#   (/etc/fmcluster), FMCLUSTER_NODENAME_FILE, FMCLUSTER_ROOT (prefix of /proc, /dev/nvidia0, /etc/docker and
#   /etc/enroot), FMCLUSTER_RETRY_DELAY (10: seconds between fetch attempts, times the attempt).
# Exit: 0 done (a failure under policy report, and anything on the head node, included), 1 unhealthy under
#   policy fail, 2 usage.
set -uo pipefail

home=${FMCLUSTER_HOME:-/opt/fmcluster}
etc=${FMCLUSTER_ETC:-/etc/fmcluster}
log_dir=${FMCLUSTER_LOG_DIR:-/var/log/fmcluster}
textfile_dir=${FMCLUSTER_TEXTFILE_DIR:-/var/lib/node_exporter/textfile_collector}
unit_dir=${FMCLUSTER_SYSTEMD_DIR:-/etc/systemd/system}
slurm_bin=${FMCLUSTER_SLURM_BIN:-/opt/slurm/bin}
slurm_scripts=${FMCLUSTER_SLURM_SCRIPTS:-/opt/slurm/etc/scripts}
pcluster_dir=${FMCLUSTER_PCLUSTER_DIR:-/opt/parallelcluster}
nodename_file=${FMCLUSTER_NODENAME_FILE:-/etc/parallelcluster/slurm_plugin/slurm_nodename}
root=${FMCLUSTER_ROOT:-}
retry_delay=${FMCLUSTER_RETRY_DELAY:-10}

role="" source_url="" region="" node_group="" level="" policy="" event=configured revision=""
WORD='^[A-Za-z0-9][A-Za-z0-9._:/@+=-]*$'

usage() {
  sed -n '18,21p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --role) role="${2:-}"; shift 2 ;;
    --source) source_url="${2:-}"; shift 2 ;;
    --region) region="${2:-}"; shift 2 ;;
    --node-group) node_group="${2:-}"; shift 2 ;;
    --level) level_arg="${2:-}"; shift 2 ;;
    --policy) policy_arg="${2:-}"; shift 2 ;;
    --event) event="${2:-}"; shift 2 ;;
    --revision) revision="${2:-}"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
done
[[ "$role" == head || "$role" == compute ]] || usage
[[ "$source_url" =~ ^s3://[^/[:space:]]+/([^[:space:]]*/)?$ && "$region" =~ $WORD && "$node_group" =~ $WORD ]] || usage
case "$event" in configured | updated) ;; *) usage ;; esac
level_arg=${level_arg:-} policy_arg=${policy_arg:-}
if [[ "$role" == compute ]]; then
  [[ "$event" == configured ]] || usage
  case "$level_arg" in "" | fast | standard) ;; *) usage ;; esac
  case "$policy_arg" in "" | fail | report) ;; *) usage ;; esac
fi
# Until the profile says otherwise, a node that cannot read it has failed (a check that could not run is no pass).
policy=${policy_arg:-fail} level=${level_arg:-standard}

install -d -m 0755 "$etc" "$home/pkg/fmcluster" "$log_dir" "$textfile_dir"
# The action's own stderr stays open as fd 3 before everything goes to the log file: ParallelCluster keeps what a
# custom action writes to stderr (docs/parallelcluster.md, "Why a node failed"), the file stays on the shut-down node.
exec 3>&2
exec >>"$log_dir/on-node-configured.log" 2>&1
# The time as `date -Is` writes it (2024-05-01T12:00:00+00:00), from bash's own strftime (printf %(...)T, bash 4.2+):
# no process per log line.
log() {
  local now
  printf -v now '%(%Y-%m-%dT%H:%M:%S%z)T' -1
  echo "${now:0:22}:${now:22} fmcluster: $*"
}
# tell LINE...: why the node is not healthy, to the log, the action's stderr and the journal (logger, bounded).
tell() {
  local line
  for line in "$@"; do
    log "$line"
    printf 'fmcluster: %s\n' "$line" >&3 2>/dev/null || true
    timeout 10 logger -t fmcluster -p user.err -- "$line" 2>/dev/null || true
  done
}
log "ParallelCluster custom action: role=$role event=$event group=$node_group level=$level policy=$policy" \
  "revision=${revision:-none}"

# The Slurm node name: ParallelCluster sets the short host name to it (and writes it to slurm_nodename).
node_name=$(cat "$nodename_file" 2>/dev/null) || node_name=""
[[ -n "$node_name" ]] || node_name=$(hostname -s)
# Slurm's commands (scontrol, sinfo) and fi_info are not on the default PATH of a unit or of this script.
unit_path="$slurm_bin:/opt/amazon/efa/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# One deadline for the whole action. A compute node must register with Slurm within ResumeTimeout (2100 s by
# ParallelCluster's default), which also covers the instance launch, the OS boot, ParallelCluster's own configuration
# before this action and its finalize step after it; the head node's bootstrap has its own limit that covers the
# compute nodes' too. So the action gets a budget (default 1200 s, docs/parallelcluster.md "Deadlines") and every step
# below is bounded by what is left of it, never by its own fixed limit alone.
budget=${FMCLUSTER_ACTION_BUDGET:-1200}
[[ "$budget" =~ ^[0-9]+$ ]] || budget=1200
# mounts.sh (the stores the nodes mount themselves) ran first in the same sequence and left "START BUDGET": the window
# began then. A stamp whose age is beyond that budget is not from this sequence.
read -r mounts_start mounts_budget _ <"${FMCLUSTER_ACTION_STAMP:-/run/fmcluster/action-started}" 2>/dev/null
if [[ "${mounts_start:-}" =~ ^[0-9]+$ && "${mounts_budget:-}" =~ ^[0-9]+$ ]]; then
  printf -v now '%(%s)T' -1
  spent=$((now - mounts_start))
  if ((spent >= 0 && spent <= mounts_budget + 15)); then
    budget=$((budget > spent + 60 ? budget - spent : 60))
    log "mounts.sh took ${spent}s of the window: ${budget}s left for this action"
  fi
fi
deadline=$((SECONDS + budget))
# what the collectors leave for the validator (and the failure report after it) on a compute node
validator_reserve=0
[[ "$role" == compute ]] && validator_reserve=$(((budget * 3) / 5))
# left CAP [RESERVE]: seconds a step may take: CAP at most, and what is left of the budget less RESERVE (at least 1).
left() {
  local cap="$1" reserve="${2:-0}" rest
  rest=$((deadline - SECONDS - reserve))
  ((rest < 1)) && rest=1
  ((rest < cap)) && cap=$rest
  echo "$cap"
}

# fetch KEY DEST: one object under SOURCE, retrying with backoff (the network can still be settling), every
# attempt under a timeout, no attempt past the budget.
fetch() {
  local attempt
  for attempt in 1 2 3 4 5 6; do
    timeout --kill-after=10 "$(left 300)" aws s3 cp --only-show-errors --region "$region" "$source_url$1" "$2" \
      && return 0
    { [[ "$attempt" -eq 6 ]] || ((SECONDS + attempt * retry_delay >= deadline)); } && return 1
    sleep $((attempt * retry_delay))
  done
}

# The runtime settings.json names, checked against its sha256, unpacked as a package.
fetch_runtime() {
  fetch "$runtime_key" "$home/runtime.zip" || return 1
  if ! echo "$runtime_sha256  $home/runtime.zip" | timeout 60 sha256sum -c --status; then
    log "$source_url$runtime_key does not match the sha256 settings.json names"
    return 1
  fi
  rm -rf "$home/pkg/fmcluster/runtime"
  timeout --kill-after=10 300 "$python" -m zipfile -e "$home/runtime.zip" "$home/pkg/fmcluster/runtime" \
    && touch "$home/pkg/fmcluster/__init__.py"
}

# The runtime needs Python 3.9+ (standard library only); RHEL 8's python3 is older, so look for a newer one.
pick_python() {
  local candidate
  for candidate in python3 python3.12 python3.11 python3.10 python3.9; do
    if command -v "$candidate" >/dev/null \
      && timeout 30 "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

# What fails before the validator can run is a failed validation too. $1: a word naming what failed. The head
# node is never failed: its bootstrap or update would fail with it.
unhealthy() {
  local what="$1"
  shift
  if [[ "$role" == head ]]; then
    log "head node: $* (boot.$what): no collectors"
    exit 0
  fi
  tell "node not healthy (boot.$what): $*"
  [[ "$policy" == fail ]] && exit 1
  exit 0
}

# settings.json as shell variables: cluster, remote_write_url, scrape_interval, runtime_key and runtime_sha256, each
# checked to be one word of its form.
cluster="" remote_write_url="" scrape_interval=30 runtime_key="" runtime_sha256=""
read_settings() {
  local key value
  while IFS=$'\t' read -r key value; do
    case "$key" in
      cluster) [[ "$value" =~ $WORD ]] && cluster="$value" ;;
      remote_write_url) [[ -z "$value" || "$value" =~ ^https://[^[:space:]]+$ ]] && remote_write_url="$value" ;;
      scrape_interval) [[ "$value" =~ ^[0-9]+$ ]] && scrape_interval="$value" ;;
      runtime_sha256) [[ "$value" =~ ^[0-9a-f]{64}$ ]] && runtime_sha256="$value" ;;
      runtime_key) [[ "$value" =~ ^runtime/[0-9a-f]{64}\.zip$ ]] && runtime_key="$value" ;;
    esac
  done < <(timeout 30 "$python" - "$1" <<'PY'
import json, sys
settings = json.load(open(sys.argv[1]))
runtime = settings.get("runtime") or {}
for key, value in (("cluster", settings.get("cluster")), ("remote_write_url", settings.get("remote_write_url")),
                   ("scrape_interval", settings.get("scrape_interval")), ("runtime_key", runtime.get("key")),
                   ("runtime_sha256", runtime.get("sha256"))):
    print(f"{key}\t{'' if value is None else value}")
PY
  )
  [[ -z "$remote_write_url" || -n "$cluster" ]] && [[ "$runtime_key" == "runtime/$runtime_sha256.zip" ]]
}

# The profile's level and policy (fast|standard, fail|report), unless the arguments named them.
read_profile_choices() {
  local out
  out=$(timeout 30 "$python" - "$1" <<'PY'
import json, sys
profile = json.load(open(sys.argv[1]))
print(f"{profile.get('level')}\t{profile.get('policy')}")
PY
  ) || return 1
  local read_level="${level_arg:-${out%%$'\t'*}}" read_policy="${policy_arg:-${out#*$'\t'}}"
  case "$read_level" in fast | standard) ;; *) return 1 ;; esac
  case "$read_policy" in fail | report) ;; *) return 1 ;; esac
  level=$read_level policy=$read_policy
}

# fetch_group DEST: the group's one object (groups/<group>.json: the settings and the profile one deployment wrote,
# together, so a node booting while a deploy rewrites the bucket never pairs one deployment's runtime with another's
# profile). 0: fetched; 2: not there (a bucket an earlier release filled, or this release's first deploy still
# writing it): read the two objects earlier releases wrote; 1: failed.
fetch_group() {
  local out
  out=$(timeout --kill-after=10 "$(left 300)" aws s3 cp --only-show-errors --region "$region" \
    "${source_url}groups/$node_group.json" "$1" 2>&1) && return 0
  [[ "$out" == *"(404)"* || "$out" == *"Not Found"* || "$out" == *"does not exist"* ]] && return 2
  fetch "groups/$node_group.json" "$1"
}

# split_group FILE: its settings and profile into $etc/settings.json and $etc/profile.json, once the document is known
# (schema 1, this group).
split_group() {
  timeout 30 "$python" - "$1" "$etc" "$node_group" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
if not isinstance(doc, dict) or doc.get("schema") != 1 or doc.get("group") != sys.argv[3] \
        or not isinstance(doc.get("settings"), dict) or not isinstance(doc.get("profile"), dict):
    sys.exit(1)
for name in ("settings", "profile"):
    with open(f"{sys.argv[2]}/{name}.json", "w") as out:
        json.dump(doc[name], out)
PY
}

python=$(pick_python) || unhealthy python "no Python 3.9+ for the fmcluster runtime"
if [[ "$role" == compute ]]; then
  fetch_group "$etc/group.json"
  case $? in
    0)
      split_group "$etc/group.json" \
        || unhealthy settings "${source_url}groups/$node_group.json is not what fmcluster writes"
      log "settings, runtime and profile from ${source_url}groups/$node_group.json (one deployment's)"
      ;;
    2)
      log "no ${source_url}groups/$node_group.json: settings.json and profiles/$node_group.json (an earlier layout)"
      fetch settings.json "$etc/settings.json" || unhealthy settings "cannot fetch ${source_url}settings.json"
      fetch "profiles/$node_group.json" "$etc/profile.json" \
        || unhealthy profile "cannot fetch ${source_url}profiles/$node_group.json"
      ;;
    *) unhealthy settings "cannot fetch ${source_url}groups/$node_group.json" ;;
  esac
  read_settings "$etc/settings.json" || unhealthy settings "the node's settings are not what fmcluster writes"
  read_profile_choices "$etc/profile.json" \
    || unhealthy profile "the node's profile names no level fast|standard and policy fail|report"
  log "level=$level policy=$policy (from the profile unless given as arguments)"
else
  fetch settings.json "$etc/settings.json" || unhealthy settings "cannot fetch ${source_url}settings.json"
  read_settings "$etc/settings.json" || unhealthy settings "${source_url}settings.json is not what fmcluster writes"
fi
fetch_runtime || unhealthy runtime "cannot fetch the fmcluster runtime ${source_url}$runtime_key"

# The head node's collector signs its remote writes with the instance credentials, which Imds Secured (the
# default) limits to a few users (HeadNode-v3 documentation: imds-access.sh --allow USER). ParallelCluster
# restores its saved iptables rules at boot, without ours: a unit allows the collector's user again after them.
allow_imds() {
  local script="$pcluster_dir/scripts/imds/imds-access.sh"
  [[ -x "$script" ]] || return 0
  timeout --kill-after=10 60 "$script" --allow fmcluster-metrics \
    || log "WARNING: could not allow fmcluster-metrics to read instance credentials"
  cat >"$unit_dir/fmcluster-imds-allow.service" <<UNIT
[Unit]
Description=fmcluster: let the metrics collector read the head node's instance credentials (Imds Secured)
After=network-online.target parallelcluster-iptables.service
Wants=network-online.target

[Service]
Type=oneshot
TimeoutStartSec=90
ExecStart=/usr/bin/timeout --kill-after=10 60 $script --allow fmcluster-metrics

[Install]
WantedBy=multi-user.target
UNIT
  if ! { timeout 60 systemctl daemon-reload && timeout 60 systemctl enable fmcluster-imds-allow.service; }; then
    log "WARNING: fmcluster-imds-allow.service not enabled: the collector loses credentials at the next reboot"
  fi
}

# GPU nodes without dcgm-exporter say so, as a metric: GpusMissingOnNode then leaves them out and
# GpuMetricsUnavailable names them (fmcluster/observability).
gpu_metrics_unavailable() {
  local reason="$1" file="$textfile_dir/fmcluster_gpu_metrics.prom"
  if [[ -z "$reason" ]]; then
    rm -f "$file"
    return 0
  fi
  printf '%s\n' "# HELP fmcluster_gpu_metrics_unavailable 1 when this GPU node runs no GPU exporter (reason)." \
    "# TYPE fmcluster_gpu_metrics_unavailable gauge" \
    "fmcluster_gpu_metrics_unavailable{reason=\"$reason\"} 1" >"$file.tmp" && mv "$file.tmp" "$file"
}

install_collectors() {
  local args=(--cluster "$cluster" --region "$region" --remote-write-url "$remote_write_url"
    --scrape-interval "$scrape_interval" --node-group "$node_group")
  if [[ "$role" == head ]]; then
    # the head node runs slurmctld: its collector reports Slurm node states; sinfo lives in $slurm_bin
    args+=(--slurm-collector --no-dcgm)
    install -d -m 0755 "$unit_dir/fmcluster-slurm-textfile.service.d"
    printf '[Service]\nEnvironment=PATH=%s\n' "$unit_path" \
      >"$unit_dir/fmcluster-slurm-textfile.service.d/parallelcluster.conf"
  elif [[ ! -e "$root/dev/nvidia0" ]]; then
    args+=(--no-dcgm)
  elif ! command -v docker >/dev/null; then
    # dcgm-exporter runs as a container; without docker the node still reports node and EFA metrics
    log "WARNING: no docker on this AMI: dcgm-exporter (GPU metrics) not installed"
    args+=(--no-dcgm)
    gpu_metrics_unavailable no-docker
  else
    gpu_metrics_unavailable ""
  fi
  local rc=0
  # metrics are worth less than a validated node: the validator's share of the budget stays reserved
  PATH="$(dirname "$python"):$PATH" timeout --kill-after=10 "$(left 1200 "$validator_reserve")" \
    bash "$home/pkg/fmcluster/runtime/observability/install.sh" "${args[@]}" || rc=$?
  if ((rc != 0)); then
    log "WARNING: collector install failed (exit $rc); the node continues without metrics"
    return 0
  fi
  [[ "$role" == head ]] && allow_imds
  return 0
}

# Slurm's Prolog and Epilog on ParallelCluster (3.6+) are every file in prolog.d and epilog.d under $slurm_scripts,
# run in reverse alphabetical order; the head node shares /opt/slurm with the compute nodes. Ours (80_...) runs after
# ParallelCluster's 90_pcluster_health_check_manager and only runs the node's own hook, which install.sh writes on
# each node: a node without it (no collectors) runs nothing and the job starts. docs/observability.md has the sources.
job_map_scripts=("$slurm_scripts/prolog.d/80_fmcluster_dcgm_job_map" "$slurm_scripts/epilog.d/80_fmcluster_dcgm_job_map")
register_job_map() {
  if [[ ! -d "$slurm_scripts/prolog.d" || ! -d "$slurm_scripts/epilog.d" ]]; then
    log "WARNING: no $slurm_scripts/prolog.d and epilog.d: Slurm jobs are not mapped to GPUs (hpc_job)"
    return 0
  fi
  PYTHONPATH="$home/pkg" timeout --kill-after=5 60 "$python" -m fmcluster.runtime.observability.slurm_job_map hooks \
    --hook-dir "$home/slurm" --shim "${job_map_scripts[@]}" >/dev/null \
    || log "WARNING: Slurm job-map scripts not written to $slurm_scripts"
}

# After an update that turned observability off: the collectors stop (the node policy no longer lets them write).
stop_collectors() {
  rm -f "${job_map_scripts[@]}"
  local unit
  for unit in fmcluster-collector.service fmcluster-node-exporter.service fmcluster-efa-textfile.timer \
    fmcluster-slurm-textfile.timer fmcluster-imds-allow.service; do
    [[ -e "$unit_dir/$unit" ]] || continue
    timeout 60 systemctl disable --now "$unit" || log "WARNING: could not stop $unit"
  done
}

# Container images and enroot's sandboxes on the instance NVMe (ParallelCluster mounts it where the node contract
# expects it), as the HyperPod lifecycle does: the root volume never fills with layers.
configure_containers() {
  local out base
  out=$(PYTHONPATH="$home/pkg" timeout 60 "$python" -m fmcluster.runtime.node_setup storage-root \
    --root "${root:-/}") || return 0
  base="${out%%$'\t'*}"
  if [[ -z "$base" ]]; then
    log "${out#*$'\t'}: container data left where the AMI puts it"
    return 0
  fi
  install -d -m 0711 "$root$base/docker/data-root"
  install -d -m 1777 "$root$base/enroot" "$root$base/enroot/runtime" "$root$base/enroot/cache" \
    "$root$base/enroot/data" "$root$base/enroot/tmp"
  if [[ -d "$root/etc/docker" ]]; then
    out=$(PYTHONPATH="$home/pkg" timeout 60 "$python" -m fmcluster.runtime.node_setup docker-config \
      --file "$root/etc/docker/daemon.json" --data-root "$base/docker/data-root") || out=failed
    log "docker data-root under $base: $out"
    if [[ "$out" == changed ]] && timeout 30 systemctl is-active --quiet docker; then
      timeout --kill-after=10 300 systemctl restart docker || log "WARNING: docker did not restart with its new data-root"
    fi
  fi
  if [[ -d "$root/etc/enroot" ]]; then
    out=$(PYTHONPATH="$home/pkg" timeout 60 "$python" -m fmcluster.runtime.node_setup enroot-config \
      --file "$root/etc/enroot/enroot.conf" --base "$base") || out=failed
    log "enroot paths under $base: $out"
  fi
}
if [[ "$role" == compute ]]; then
  configure_containers
fi

# Slurm's HealthCheckProgram (fmcluster.runtime.health_check; docs/resilience.md): the cluster's slurm.conf names a
# shim under the shared $slurm_scripts that the head node writes on every event, so it exists before any compute
# node's slurmd reads it; the shim runs the node's own program, which each compute node writes here, before slurmd
# starts, and succeeds where there is none. Inert unless CustomSlurmSettings names the shim; never fatal.
health_check_shim="$slurm_scripts/fmcluster_health_check.sh"
if [[ "$role" == head ]]; then
  PYTHONPATH="$home/pkg" timeout --kill-after=5 60 "$python" -m fmcluster.runtime.health_check install \
    --shim "$health_check_shim" --hook-dir "$home/slurm" >/dev/null \
    || log "WARNING: Slurm health check shim not written to $health_check_shim"
else
  PYTHONPATH="$home/pkg" timeout --kill-after=5 60 "$python" -m fmcluster.runtime.health_check install \
    --profile "$etc/profile.json" --node-name "$node_name" --hook-dir "$home/slurm" >/dev/null \
    || log "WARNING: Slurm health check program not written"
fi

if [[ -n "$remote_write_url" ]]; then
  install_collectors
  [[ "$role" == head ]] && register_job_map
elif [[ "$event" == updated ]]; then
  stop_collectors
fi
if [[ "$role" == head ]]; then
  log "head node done ($event)"
  exit 0
fi

validate() {
  # $1: policy; the Slurm checks look the node up by its Slurm name with ParallelCluster's scontrol
  local run_policy="$1"
  shift
  PATH="$slurm_bin:/opt/amazon/efa/bin:$PATH" PYTHONPATH="$home/pkg" timeout --kill-after=10 "$(left 1900 60)" \
    "$python" -m fmcluster.runtime.validate --profile "$etc/profile.json" --level "$level" --format json \
    --prom "$textfile_dir/fmcluster_node_validation.prom" --policy "$run_policy" --node-name "$node_name" "$@"
}

# slurmd is not running yet, and the node's Slurm state belongs to ParallelCluster until it resumes the node:
# neither can be checked here.
# report_node: the instance, its group, runtime and verdict, to where its group's object says, for `fmcluster status`
# (runtime/node_report.py); only a node that read the group's object has one; a report not sent is logged, no more.
report_node() {
  local where url report_region
  [[ -f "$etc/group.json" ]] || return 0
  where=$(PYTHONPATH="$home/pkg" timeout --kill-after=5 "$(left 30)" "$python" -m fmcluster.runtime.node_report \
    --pointer "$etc/group.json" --validation "$log_dir/validate.json" --out "$etc/node-report.json" \
    --root "$root") || return 0
  read -r url report_region <<<"$where"
  timeout --kill-after=5 "$(left 60)" aws s3 cp --only-show-errors --region "$report_region" \
    "$etc/node-report.json" "$url" || log "WARNING: the node report did not reach $url"
}

validate report --skip orch.agent --skip orch.slurm_node >"$log_dir/validate.json"
status=$?
report_node
if [[ "$status" -eq 0 ]]; then
  log "node validation passed"
  exit 0
fi
failing=$(PYTHONPATH="$home/pkg" timeout --kill-after=5 30 "$python" -m fmcluster.runtime.report \
  --failing "$log_dir/validate.json" 2>&1 | head -c 4000) || true
mapfile -t failing_lines <<<"$failing"
tell "node validation failed (exit $status, policy $policy) on $node_name; failing checks:" "${failing_lines[@]}" \
  "full report: $log_dir/validate.json"
if [[ "$policy" == fail ]]; then
  tell "policy fail: exit 1, ParallelCluster replaces the instance"
  exit 1
fi
exit 0
