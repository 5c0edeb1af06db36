#!/usr/bin/env bash
# Tools `make setup` adds from the system's packages. For everyone: dot from graphviz (`fmcluster diagram` and
# `plan --html` draw the cluster with it), with apt-get, dnf, yum, zypper or Homebrew. For the test suite only:
# promtool and amtool (alert rules and Alertmanager config), shellcheck (node scripts) and chromium (the planner's
# page in a headless browser), installed with apt-get, whose package names these are; elsewhere they are skipped with
# one line, and `make test` says which test needs which. Never fails setup: what it cannot install, it names.
# Idempotent; installs as root, through sudo when not root. Written for bash 3.2 too (macOS's /bin/bash): no
# associative arrays, no empty arrays under set -u.
set -euo pipefail
need_user=""
command -v dot >/dev/null 2>&1 || need_user="graphviz"
need_test=""
for pair in promtool:prometheus amtool:prometheus-alertmanager shellcheck:shellcheck chromium:chromium; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need_test="$need_test ${pair#*:}"
done
need_test="${need_test# }"
[ -z "$need_user" ] && [ -z "$need_test" ] && exit 0
as_root=""
[ "$(id -u)" -eq 0 ] || as_root="sudo"

if command -v apt-get >/dev/null 2>&1; then
  echo "install-tools: installing $need_user $need_test" >&2
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck disable=SC2086 # word splitting is wanted: as_root may be empty, the lists are package names
  $as_root apt-get update -qq >/dev/null
  # --no-install-recommends keeps the Prometheus server's web assets and extras out
  # shellcheck disable=SC2086
  $as_root apt-get install -y -qq --no-install-recommends $need_user $need_test >/dev/null
  exit 0
fi

if [ -n "$need_test" ]; then
  echo "install-tools: skipping the test-only tools ($need_test): their packages are named for apt-get; install" \
    "them yourself to run make test (CONTRIBUTING.md)" >&2
fi
[ -z "$need_user" ] && exit 0
if command -v brew >/dev/null 2>&1; then
  install="brew install graphviz"   # Homebrew installs as the user, never through sudo
elif command -v dnf >/dev/null 2>&1; then
  install="$as_root dnf install -y -q graphviz"
elif command -v yum >/dev/null 2>&1; then
  install="$as_root yum install -y -q graphviz"
elif command -v zypper >/dev/null 2>&1; then
  install="$as_root zypper --non-interactive install graphviz"
else
  echo "install-tools: no apt-get, dnf, yum, zypper or brew: install graphviz (its dot command) yourself for" \
    "fmcluster diagram and plan --html" >&2
  exit 0
fi
install="${install# }"
echo "install-tools: installing graphviz ($install)" >&2
# shellcheck disable=SC2086
$install >/dev/null || echo "install-tools: '$install' failed: install graphviz yourself for fmcluster diagram" \
  "and plan --html" >&2
