#!/bin/bash
# Free the GPUs' profiling counters for Nsight Compute / Nsight Systems, then give them back:
#   sudo fmcluster/runtime/observability/profiling_pause.sh pause     # before the profiling session
#   sudo fmcluster/runtime/observability/profiling_pause.sh resume    # after it
# Only one profiling client may use a GPU's counters at a time (DCGM: dcgmi profile --pause "releases profiling
# resources so developer tools such as Nsight Compute or Nsight Systems can use them"). fmcluster's dcgm-exporter
# runs DCGM's host engine embedded (dcgm-exporter docs, "Running dcgm-exporter"), which dcgmi cannot reach, so the
# pause stops the exporter: every GPU field of the node stops with it. While paused the node says so in a textfile
# (fmcluster_gpu_metrics_unavailable{reason="profiling-paused"}): GpusMissingOnNode does not page, the info alert
# GpuMetricsUnavailable shows the pause after 15 minutes. Every command is bounded in time.
set -uo pipefail

UNIT="${FMCLUSTER_DCGM_UNIT:-fmcluster-dcgm-exporter.service}"
TEXTFILE_DIR="${FMCLUSTER_TEXTFILE_DIR:-/var/lib/node_exporter/textfile_collector}"
MARK="$TEXTFILE_DIR/fmcluster_profiling_paused.prom"

case "${1:-}" in
  pause)
    tmp="$(mktemp "$TEXTFILE_DIR/.profiling-paused.XXXXXX")" || exit 1
    printf '# HELP fmcluster_gpu_metrics_unavailable 1 on a GPU node that runs no GPU exporter, with the reason.\n# TYPE fmcluster_gpu_metrics_unavailable gauge\nfmcluster_gpu_metrics_unavailable{reason="profiling-paused"} 1\n' >"$tmp"
    chmod 0644 "$tmp" && mv -f "$tmp" "$MARK"
    if ! timeout 120 systemctl stop "$UNIT"; then
      echo "profiling_pause: could not stop $UNIT; the counters may still be held" >&2
      exit 1
    fi
    echo "profiling paused: $UNIT stopped; run '$0 resume' when the Nsight session ends"
    ;;
  resume)
    if ! timeout 120 systemctl start "$UNIT"; then
      echo "profiling_pause: could not start $UNIT; the pause mark stays so the node does not page" >&2
      exit 1
    fi
    rm -f "$MARK"
    echo "profiling resumed: $UNIT running"
    ;;
  *)
    echo "usage: $0 pause|resume" >&2
    exit 2
    ;;
esac
