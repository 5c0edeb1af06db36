#!/usr/bin/env bash
# Node collectors for fmcluster: node_exporter (textfile collector), dcgm-exporter (GPU nodes), the EFA and
# Slurm textfile collectors, and Prometheus in agent mode remote-writing to Amazon Managed Service for
# Prometheus with SigV4 (the instance role needs aps:RemoteWrite: ObservabilityStack.grant_remote_write).
#
# Usage (as root, from the HyperPod lifecycle script or launch-template user data):
#   install.sh --cluster NAME --region REGION --remote-write-url URL
#              [--scrape-interval 30] [--node-group NAME] [--slurm-collector] [--no-dcgm]
#   install.sh verify FILE SHA256      # check a file against a pinned checksum (used by the tests)
#
# --slurm-collector: also report Slurm node states (sinfo) from this node; any node with Slurm's client commands
# (HyperPod controller, PCS login node, ParallelCluster head node). --slurm-controller is its older name.
#
# Every download is pinned to a version and checked against the SHA-256 below before it is unpacked; a
# component without a pinned checksum for this architecture is refused, never installed unchecked.
# Exporters listen on 127.0.0.1 only: nothing on the node accepts metrics traffic from the network.
# Idempotent: re-running replaces binaries, configuration and units and restarts the services.
set -euo pipefail

NODE_EXPORTER_VERSION="1.8.2"
# sha256 of node_exporter-1.8.2.linux-{amd64,arm64}.tar.gz (the release's sha256sums.txt, as pinned by several
# public projects)
NODE_EXPORTER_SHA256_amd64="6809dd0b3ec45fd6e992c19071d6b5253aed3ead7bf0686885a51d85c6643c66"
NODE_EXPORTER_SHA256_arm64="627382b9723c642411c33f48861134ebe893e70a63bcc8b3fc0619cd0bfac4be"

PROMETHEUS_VERSION="2.53.4"
# sha256 of prometheus-2.53.4.linux-{amd64,arm64}.tar.gz (2.53 is the long-term-support line; agent mode and
# sigv4 remote_write are both in it)
PROMETHEUS_SHA256_amd64="b8b497c4610d1b93208252b60c8f20f6b2e78596ae8df43397a2e805aa53d475"
PROMETHEUS_SHA256_arm64="ec7236ecea7154d0bfe142921708b1ae7b5e921e100e0ee85ab92b7c444357e0"

# dcgm-exporter container, pinned by tag AND digest (the digest is the image's checksum: docker refuses any
# other content). DCGM 4.4.1 inside; the host needs only the NVIDIA driver and the container toolkit.
DCGM_EXPORTER_IMAGE="nvcr.io/nvidia/k8s/dcgm-exporter:4.4.1-4.6.0-ubuntu22.04"
# GPU -> Slurm job files for dcgm-exporter --hpc-job-mapping-dir (fmcluster/runtime/observability/slurm_job_map.py)
JOB_MAP_DIR=/run/fmcluster/dcgm-job-map
DCGM_EXPORTER_DIGEST="sha256:b7a4241c608253aa829041cc3575ea57082491251a4a626bcdddc68eaf9a3101"
# DCGM_EXP_XID_ERRORS_COUNT counts Xid events over this window (dcgm-exporter --xid-count-window-size, ms;
# default 5 min): 10 min spans a missed scrape or two, and the Xid alerts in rules.yaml are written for it.
XID_COUNT_WINDOW_MS=600000

PREFIX="/opt/fmcluster/observability"
ETC="/etc/fmcluster"
TEXTFILE_DIR="/var/lib/node_exporter/textfile_collector"
UNIT_DIR="/etc/systemd/system"
# the Slurm collector unit's PATH: Slurm's own prefix first, then systemd's default
SLURM_PATH="/opt/slurm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SERVICE_USER="fmcluster-metrics"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# the directory holding the fmcluster package (…/fmcluster/runtime/observability → …)
PKG_ROOT="$(cd "$HERE/../../.." && pwd)"

log() { echo "fmcluster-observability: $*" >&2; }
die() { log "error: $*"; exit 1; }

# verify FILE SHA256: exit non-zero unless FILE has exactly that checksum; an empty checksum is refused.
verify() {
  local file="$1" want="$2" got
  [[ "$want" =~ ^[0-9a-f]{64}$ ]] || die "no valid pinned sha256 for $(basename "$file"); refusing to install it unchecked"
  got="$(sha256sum "$file" | cut -d' ' -f1)"
  [[ "$got" == "$want" ]] || die "checksum mismatch for $(basename "$file"): got $got, pinned $want"
}

arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    *) die "unsupported architecture $(uname -m)" ;;
  esac
}

# fetch URL SHA256 DEST: download with retries (boot-time networks are flaky), then verify.
fetch() {
  local url="$1" sha="$2" dest="$3"
  [[ "$sha" =~ ^[0-9a-f]{64}$ ]] || die "no pinned sha256 for $url; refusing to download it"
  curl --fail --silent --show-error --location --retry 8 --retry-delay 5 --retry-all-errors \
    --connect-timeout 20 --max-time 600 -o "$dest" "$url"
  verify "$dest" "$sha"
}

# install_release NAME VERSION SHA256 URL_BASE BINARY...: verified archive → $PREFIX/bin
install_release() {
  local name="$1" version="$2" sha="$3" base="$4"
  shift 4
  local a tarball work bin
  a="$(arch)"
  tarball="$name-$version.linux-$a.tar.gz"
  work="$(mktemp -d)"
  fetch "$base/v$version/$tarball" "$sha" "$work/$tarball"
  tar -xzf "$work/$tarball" -C "$work"
  for bin in "$@"; do
    install -m 0755 -o root -g root "$work/$name-$version.linux-$a/$bin" "$PREFIX/bin/$bin"
  done
  rm -rf "$work"
  log "installed $name $version ($a), checksum verified"
}

# pinned_sha COMPONENT: the pinned checksum of COMPONENT's archive for this machine's architecture.
pinned_sha() {
  case "$1-$(arch)" in
    node_exporter-amd64) echo "$NODE_EXPORTER_SHA256_amd64" ;;
    node_exporter-arm64) echo "$NODE_EXPORTER_SHA256_arm64" ;;
    prometheus-amd64) echo "$PROMETHEUS_SHA256_amd64" ;;
    prometheus-arm64) echo "$PROMETHEUS_SHA256_arm64" ;;
    *) echo "" ;;
  esac
}

write_unit() {
  local name="$1"
  cat > "$UNIT_DIR/$name"
  chmod 0644 "$UNIT_DIR/$name"
}

usage() {
  sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

main() {
  local cluster="" region="" url="" interval=30 group="" slurm_collector=0 dcgm=1
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --cluster) cluster="${2:-}"; shift 2 ;;
      --region) region="${2:-}"; shift 2 ;;
      --remote-write-url) url="${2:-}"; shift 2 ;;
      --scrape-interval) interval="${2:-}"; shift 2 ;;
      --node-group) group="${2:-}"; shift 2 ;;
      --slurm-collector|--slurm-controller) slurm_collector=1; shift ;;
      --no-dcgm) dcgm=0; shift ;;
      -h|--help) usage ;;
      *) log "unknown argument: $1"; usage ;;
    esac
  done
  [[ -n "$cluster" && -n "$region" && -n "$url" ]] || usage
  [[ "$(id -u)" -eq 0 ]] || die "run as root"
  command -v python3 >/dev/null || die "python3 is required"
  # Slurm's Prolog/Epilog (registered by the orchestrator) run these on every job; a missing one drains the node, so
  # they are written first, before anything here can fail on a download.
  PYTHONPATH="$PKG_ROOT" python3 -m fmcluster.runtime.observability.slurm_job_map hooks --dir "$JOB_MAP_DIR" >/dev/null \
    || log "WARNING: Slurm job-map hooks not written"

  id "$SERVICE_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$SERVICE_USER"
  install -d -m 0755 "$PREFIX/bin" "$ETC"
  install -d -m 0775 -o root -g "$SERVICE_USER" "$TEXTFILE_DIR"
  install -d -m 0750 -o "$SERVICE_USER" -g "$SERVICE_USER" /var/lib/fmcluster-agent

  install_release node_exporter "$NODE_EXPORTER_VERSION" "$(pinned_sha node_exporter)" \
    https://github.com/prometheus/node_exporter/releases/download node_exporter
  install_release prometheus "$PROMETHEUS_VERSION" "$(pinned_sha prometheus)" \
    https://github.com/prometheus/prometheus/releases/download prometheus

  local dcgm_flag=auto
  [[ "$dcgm" -eq 1 ]] || dcgm_flag=no
  local group_args=()
  [[ -z "$group" ]] || group_args=(--node-group "$group")
  PYTHONPATH="$PKG_ROOT" python3 -m fmcluster.runtime.observability.collector_config \
    --cluster "$cluster" --region "$region" --remote-write-url "$url" --scrape-interval "$interval" \
    --dcgm "$dcgm_flag" "${group_args[@]}" --out "$ETC/agent.yml"
  "$PREFIX/bin/prometheus" --version >/dev/null

  write_unit fmcluster-node-exporter.service <<EOF
[Unit]
Description=fmcluster node_exporter (textfile collector: $TEXTFILE_DIR)
After=network.target

[Service]
User=$SERVICE_USER
ExecStart=$PREFIX/bin/node_exporter --web.listen-address=127.0.0.1:9100 \\
  --collector.textfile.directory=$TEXTFILE_DIR --collector.filesystem.mount-timeout=5s
Restart=always
RestartSec=5
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes

[Install]
WantedBy=multi-user.target
EOF

  write_unit fmcluster-collector.service <<EOF
[Unit]
Description=fmcluster collector: Prometheus agent remote-writing to AMP (SigV4, instance role)
After=network-online.target
Wants=network-online.target

[Service]
User=$SERVICE_USER
ExecStart=$PREFIX/bin/prometheus --agent --config.file=$ETC/agent.yml \\
  --storage.agent.path=/var/lib/fmcluster-agent --web.listen-address=127.0.0.1:9090
Restart=always
RestartSec=5
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
ReadWritePaths=/var/lib/fmcluster-agent

[Install]
WantedBy=multi-user.target
EOF

  write_unit fmcluster-efa-textfile.service <<EOF
[Unit]
Description=fmcluster EFA counters to $TEXTFILE_DIR

[Service]
Type=oneshot
User=$SERVICE_USER
Environment=PYTHONPATH=$PKG_ROOT
ExecStart=/usr/bin/env python3 -m fmcluster.runtime.observability.efa_textfile
TimeoutStartSec=30
EOF
  write_unit fmcluster-efa-textfile.timer <<EOF
[Unit]
Description=fmcluster EFA counters every ${interval}s

[Timer]
OnBootSec=30s
OnUnitActiveSec=${interval}s
AccuracySec=1s

[Install]
WantedBy=timers.target
EOF

  # On a clean shutdown (scale-in, replacement, teardown) the node says so in its last scrapes, so
  # NodeStoppedReporting leaves it out (shutdown_mark.py). Ordered after the collector and node_exporter: systemd
  # stops it first, and they still run while its stop writes the mark and waits a scrape interval and a margin.
  write_unit fmcluster-shutdown-mark.service <<EOF
[Unit]
Description=fmcluster: say in the last scrapes that this node shuts down on purpose
After=fmcluster-collector.service fmcluster-node-exporter.service

[Service]
Type=oneshot
RemainAfterExit=yes
Environment=PYTHONPATH=$PKG_ROOT
ExecStart=/usr/bin/env python3 -m fmcluster.runtime.observability.shutdown_mark start
ExecStop=/usr/bin/env python3 -m fmcluster.runtime.observability.shutdown_mark stop --wait $((interval + 15))
TimeoutStopSec=$((interval + 45))

[Install]
WantedBy=multi-user.target
EOF

  local units=(fmcluster-node-exporter.service fmcluster-collector.service fmcluster-efa-textfile.timer)

  if [[ "$slurm_collector" -eq 1 ]]; then
    # systemd's default PATH has none of Slurm's prefixes: the collector looks for sinfo in them itself, and the
    # unit's PATH names them too (HyperPod and ParallelCluster: /opt/slurm/bin)
    write_unit fmcluster-slurm-textfile.service <<EOF
[Unit]
Description=fmcluster Slurm node states to $TEXTFILE_DIR

[Service]
Type=oneshot
User=$SERVICE_USER
Environment=PYTHONPATH=$PKG_ROOT
Environment=PATH=$SLURM_PATH
ExecStart=/usr/bin/env python3 -m fmcluster.runtime.observability.slurm_textfile
TimeoutStartSec=60
EOF
    write_unit fmcluster-slurm-textfile.timer <<EOF
[Unit]
Description=fmcluster Slurm node states every 60s

[Timer]
OnBootSec=60s
OnUnitActiveSec=60s

[Install]
WantedBy=timers.target
EOF
    units+=(fmcluster-slurm-textfile.timer)
  fi

  if [[ "$dcgm" -eq 1 && -e /dev/nvidia0 ]]; then
    command -v docker >/dev/null || die "dcgm-exporter needs docker with the NVIDIA container toolkit (DLAMI has both)"
    # the shared fields plus the GPU architecture's (NVLink error counters differ between Hopper and Blackwell)
    PYTHONPATH="$PKG_ROOT" python3 -m fmcluster.runtime.observability.dcgm_fields --out "$ETC/dcgm-counters.csv"
    local image="$DCGM_EXPORTER_IMAGE@$DCGM_EXPORTER_DIGEST"
    [[ "$DCGM_EXPORTER_DIGEST" =~ ^sha256:[0-9a-f]{64}$ ]] || die "no pinned dcgm-exporter digest; refusing to run an unverified image"
    # Slurm's prolog writes which job holds each GPU here (slurm_job_map.py); the exporter labels series hpc_job.
    # /run is a tmpfs: a reboot ends every job, and the map with it.
    install -d -m 0755 "$JOB_MAP_DIR"
    # pulled by digest: docker verifies the content against it
    docker pull --quiet "$image" >/dev/null
    write_unit fmcluster-dcgm-exporter.service <<EOF
[Unit]
Description=fmcluster dcgm-exporter ($DCGM_EXPORTER_IMAGE)
After=docker.service nvidia-persistenced.service
Requires=docker.service

[Service]
ExecStartPre=-/usr/bin/docker rm -f fmcluster-dcgm-exporter
ExecStart=/usr/bin/docker run --rm --name fmcluster-dcgm-exporter --gpus all --cap-add SYS_ADMIN \\
  -p 127.0.0.1:9400:9400 -v $ETC/dcgm-counters.csv:/etc/dcgm-exporter/fmcluster.csv:ro \\
  -v $JOB_MAP_DIR:$JOB_MAP_DIR:ro \\
  $image -f /etc/dcgm-exporter/fmcluster.csv --xid-count-window-size $XID_COUNT_WINDOW_MS \\
  --hpc-job-mapping-dir $JOB_MAP_DIR
ExecStop=/usr/bin/docker stop fmcluster-dcgm-exporter
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
EOF
    units+=(fmcluster-dcgm-exporter.service)
  else
    log "no GPUs (or --no-dcgm): dcgm-exporter not installed"
  fi

  systemctl daemon-reload
  systemctl enable "${units[@]}" fmcluster-shutdown-mark.service
  systemctl restart "${units[@]}"
  # started, never restarted: its stop marks the node only while the system shuts down, and a start is all it needs
  systemctl start fmcluster-shutdown-mark.service
  log "running: ${units[*]}; validator textfile: $TEXTFILE_DIR/fmcluster_node_validation.prom"
}

if [[ "${1:-}" == "verify" ]]; then
  [[ $# -eq 3 ]] || usage
  verify "$2" "$3"
  log "ok: $(basename "$2")"
  exit 0
fi
main "$@"
