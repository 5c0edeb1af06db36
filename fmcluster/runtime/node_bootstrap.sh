#!/bin/bash
# fmcluster node bootstrap: validate this node's software stack before it takes work.
# Shared by launch-template user data (PCS, plain EC2) and the HyperPod lifecycle scripts.
#
# Environment (set by the caller):
#   FMCLUSTER_HOME      where the runtime is unpacked (default /opt/fmcluster); the package
#                       lives in $FMCLUSTER_HOME/pkg/fmcluster/runtime
#   FMCLUSTER_PROFILE   NodeProfile JSON rendered at synth (default /etc/fmcluster/profile.json)
#   FMCLUSTER_LEVEL     fast | standard | deep (default standard)
#   FMCLUSTER_POLICY    fail | drain | taint | report (default drain)
#   FMCLUSTER_STATE_DIR where the last report is published for whatever gates scheduling on it, renamed into place
#                       so a reader never sees half a file (default /var/lib/fmcluster: validation.json; the EKS
#                       node gate, fmcluster/platforms/kubernetes/node/kube_gate.py, reads it)
#   FMCLUSTER_POINTER   the pointer this node booted from (default /etc/fmcluster/boot.json): where the node report
#                       for `fmcluster status` goes (runtime/node_report.py); none named, none sent
# Exit status: 0 healthy (or a failure handled by drain/taint/report), 1 unhealthy under policy fail.
set -uo pipefail

home=${FMCLUSTER_HOME:-/opt/fmcluster}
profile=${FMCLUSTER_PROFILE:-/etc/fmcluster/profile.json}
level=${FMCLUSTER_LEVEL:-standard}
policy=${FMCLUSTER_POLICY:-drain}
log_dir=${FMCLUSTER_LOG_DIR:-/var/log/fmcluster}
textfile_dir=${FMCLUSTER_TEXTFILE_DIR:-/var/lib/node_exporter/textfile_collector}
unit_dir=${FMCLUSTER_SYSTEMD_DIR:-/etc/systemd/system}
state_dir=${FMCLUSTER_STATE_DIR:-/var/lib/fmcluster}

mkdir -p "$log_dir" "$textfile_dir"
exec >>"$log_dir/bootstrap.log" 2>&1
# The unit of the profile's orchestrator agent (slurmd, kubelet), which a drain or taint waits for; the node
# contract (runtime/contract.py) maps agents to units, so the name is said once.
agent=$(PYTHONPATH="$home/pkg" python3 -m fmcluster.runtime.contract agent-unit --profile "$profile") || agent=none
echo "$(date -Is) fmcluster bootstrap: level=$level policy=$policy agent=$agent"

# Slurm's HealthCheckProgram (fmcluster.runtime.health_check), written before slurmd starts, which runs it first
# when it starts: inert unless the cluster's slurm.conf names it (docs/resilience.md), never fatal.
if [ "$agent" = slurmd ]; then
  PYTHONPATH="$home/pkg" timeout --kill-after=5 60 python3 -m fmcluster.runtime.health_check install \
    --profile "$profile" --hook-dir "$home/slurm" >/dev/null \
    || echo "$(date -Is) WARNING: the Slurm health check program was not written"
fi

# At first boot the agent (slurmd, kubelet) starts after this script, so its check waits for the run after it. On EKS
# managed nodes kubelet already runs when this script starts (docs/eks.md, "Boot order on AL2023"); there the node
# gate, a pod that runs only once kubelet does, stands for that check.
skip=()
if [ "$agent" != none ]; then
  skip=(--skip orch.agent)
fi

validate() {
  # $1: policy to apply; the report goes to a file, the textfile to node_exporter
  PYTHONPATH="$home/pkg" timeout --kill-after=10 1900 python3 -m fmcluster.runtime.validate \
    --profile "$profile" --level "$level" --format json --prom "$textfile_dir/fmcluster_node_validation.prom" \
    --policy "$1" "${skip[@]}" >"$log_dir/validate.json"
}

publish() {
  # $1: the validator's exit status. A report that is not JSON (the validator crashed or timed out) is published as
  # a failure, so a gate never waits for a result that will not come.
  mkdir -p "$state_dir"
  if python3 -c 'import json, sys; assert isinstance(json.load(open(sys.argv[1])), dict)' "$log_dir/validate.json" \
      2>/dev/null; then
    cp "$log_dir/validate.json" "$state_dir/.validation.json.tmp"
  else
    printf '{"verdict": "fail", "failing": ["validator"], "error": "the validator exited %s without a report"}\n' \
      "$1" >"$state_dir/.validation.json.tmp"
  fi
  chmod 0644 "$state_dir/.validation.json.tmp"
  mv -f "$state_dir/.validation.json.tmp" "$state_dir/validation.json"
}

report_node() {
  # The instance, its group, the runtime it runs and its verdict, to the bucket its pointer names, for `fmcluster
  # status`; a report that cannot be written or sent is logged, never a failed boot.
  local pointer="${FMCLUSTER_POINTER:-/etc/fmcluster/boot.json}" where url region
  [ -f "$pointer" ] || return 0
  where=$(PYTHONPATH="$home/pkg" timeout --kill-after=5 30 python3 -m fmcluster.runtime.node_report \
    --pointer "$pointer" --validation "$state_dir/validation.json" --out "$state_dir/node-report.json" \
    --root "${FMCLUSTER_ROOT:-}") || return 0
  read -r url region <<<"$where"
  timeout --kill-after=5 60 aws s3 cp --only-show-errors --region "$region" "$state_dir/node-report.json" "$url" \
    || echo "$(date -Is) WARNING: the node report did not reach $url"
}

validate report
status=$?
publish "$status"
report_node
if [ "$status" -eq 0 ]; then
  echo "$(date -Is) node validation passed"
  exit 0
fi
echo "$(date -Is) node validation failed (exit $status); see $log_dir/validate.json"

case "$policy" in
  fail)
    exit 1
    ;;
  report)
    exit 0
    ;;
  drain | taint)
    if [ "$agent" = none ]; then
      echo "policy $policy needs an orchestrator agent; reporting only"
      exit 0
    fi
    # The agent starts after this script: act once it is up (a oneshot unit ordered after it).
    cat >"$unit_dir/fmcluster-validate.service" <<UNIT
[Unit]
Description=fmcluster: $policy this node when its software stack fails validation
After=$agent.service network-online.target
Wants=network-online.target

[Service]
Type=oneshot
Environment=PYTHONPATH=$home/pkg
ExecStartPre=/bin/sleep 30
ExecStart=/usr/bin/timeout --kill-after=10 1900 /usr/bin/python3 -m fmcluster.runtime.validate --profile $profile --level $level --format json --prom $textfile_dir/fmcluster_node_validation.prom --policy $policy
StandardOutput=append:$log_dir/validate-$policy.json
StandardError=append:$log_dir/bootstrap.log

[Install]
WantedBy=multi-user.target
UNIT
    systemctl daemon-reload
    systemctl enable fmcluster-validate.service
    systemctl start --no-block fmcluster-validate.service
    exit 0
    ;;
  *)
    echo "unknown policy $policy"
    exit 1
    ;;
esac
