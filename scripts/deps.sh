#!/usr/bin/env bash
# Installs the Debian packages uplink needs to build, test and run its demo. Idempotent and
# quiet when everything is present; needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  # toolchain
  g++ cmake ninja-build ccache pkg-config make
  # libraries (Boost 1.81: Asio, Beast, JSON, URL are header-only)
  libboost1.81-dev libssl-dev libsqlite3-dev zlib1g-dev libyaml-dev libsodium-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # real tools the tests drive
  kubectl openssl sqlite3 curl procps
  # node_exporter: the node role's metric names and values are checked against it, and
  # its CPU and memory are the baseline of bench_node
  prometheus-node-exporter
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

# kubectl is not in Debian's own archive; it comes from the Kubernetes apt repository (or the
# Google Cloud SDK one). Say so plainly instead of failing inside apt-get.
if [[ " ${missing[*]} " == *" kubectl "* ]] && [[ -z "$(apt-cache policy kubectl 2>/dev/null | awk '/Candidate:/ && $2 != "(none)"')" ]]; then
  echo "deps: kubectl is missing and no configured apt source offers it." >&2
  echo "      Add the Kubernetes project's apt repository, or install kubectl to /usr/bin;" >&2
  echo "      the tests drive the real kubectl against uplink-kubesim." >&2
  exit 1
fi

echo "deps: installing ${missing[*]}" >&2
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/uplink-deps.log 2>&1; then
  # A fresh machine may have no package lists yet.
  $sudo apt-get update -qq >>/tmp/uplink-deps.log 2>&1
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >>/tmp/uplink-deps.log 2>&1 ||
    { cat /tmp/uplink-deps.log >&2; echo "deps: apt-get failed (log above)" >&2; exit 1; }
fi
