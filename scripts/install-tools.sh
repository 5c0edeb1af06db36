#!/usr/bin/env bash
# Tools from the distribution's packages: promtool and amtool (alert rules and
# Alertmanager config checks), shellcheck (node scripts), dot from graphviz (`fmcluster
# diagram` and `plan --html` draw the cluster with it) and chromium (the planner's page is
# tested in a real headless browser). Idempotent; needs root or sudo.
set -euo pipefail
declare -A tool_pkg=([promtool]=prometheus [amtool]=prometheus-alertmanager [shellcheck]=shellcheck [dot]=graphviz
                   [chromium]=chromium)
missing=()
for tool in "${!tool_pkg[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${tool_pkg[$tool]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-tools: no apt-get; install ${missing[*]} with your package manager" >&2
  exit 1
fi
echo "install-tools: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
# --no-install-recommends keeps the Prometheus server's web assets and extras out
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
