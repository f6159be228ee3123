#!/usr/bin/env bash
# Installs what uplink needs to build, test and run its demo. Idempotent and quiet when
# everything is present; needs root (or sudo) only when a Debian package is missing.
#
# UPLINK_DEPS=build installs only what `make build` needs (the container image build uses
# it); the default, UPLINK_DEPS=all, adds the tools the tests drive and the chart tests'
# Go and npm packages.
set -euo pipefail

profile=${UPLINK_DEPS:-all}
case "$profile" in
  build|all) ;;
  *) echo "deps: UPLINK_DEPS must be build or all, not '$profile'" >&2; exit 2 ;;
esac

packages=(
  # toolchain
  g++ cmake ninja-build ccache pkg-config make
  # libraries (Boost 1.81: Asio, Beast, JSON, URL are header-only)
  libboost1.81-dev libssl-dev libsqlite3-dev zlib1g-dev libyaml-dev libsodium-dev
  libqrencode-dev  # the console's two-factor set-up: the otpauth:// URI as a QR code
  libsnappy-dev  # the console's remote write bodies (serve --remote-write-url)
  libpq-dev  # the console's PostgreSQL store (libpq)
  libgtest-dev libgmock-dev libbenchmark-dev
)
if [[ "$profile" == all ]]; then
  packages+=(
    # real tools the tests drive
    kubectl openssl sqlite3 curl procps
    postgresql-15  # the PostgreSQL store's tests start a real server (tests/support/postgres_server.cc)
    zbar-tools  # zbarimg: the two-factor tests read the console's QR codes back with a real scanner
    chromium  # headless, for the web console's browser tests (tests/browser, playwright-core)
    # clang and its libFuzzer runtime: make test runs the kubectl guard's fuzz target for a
    # bounded time (clang-14 does not pull in libclang-rt-14-dev by itself)
    clang libclang-rt-14-dev
    # node_exporter: the node role's metric names and values are checked against it, and
    # its CPU and memory are the baseline of bench_node
    prometheus-node-exporter
    # remote write: Prometheus receives what the console forwards and is queried back with
    # PromQL; protoc decodes the console's protobuf against Prometheus's schema
    prometheus protobuf-compiler
    # bench_load's HTTP floor: nginx answering 204 to the same requests as the console
    nginx-light
    # make images and its test: podman with runc (crun refuses hybrid cgroups), uidmap for
    # rootless podman, mmdebstrap for base images from Debian's archive, and Debian's
    # docker-registry for the test's registry on loopback
    podman runc uidmap mmdebstrap docker-registry
    # workspace SSH: sshd -T checks deploy/workspace/sshd_config; the client logs in through
    # sshd -i in a workspace container
    openssh-server openssh-client
    # the chart tests' renderer (tests/chart): Go's text/template with sprig, as Helm
    # renders, plus YAML and JSON Schema; built offline from Debian's Go sources
    golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
    golang-github-xeipuuv-gojsonschema-dev
  )
fi
# Node.js and npm: the console's web pages are bundled with esbuild at build time, and the
# chart tests read Kubernetes schemas (package.json). A machine may have them from elsewhere
# (NodeSource's nodejs bundles npm and conflicts with Debian's npm package): only when the
# commands are missing are Debian's packages installed.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -gt 0 ]]; then
  # kubectl is not in Debian's own archive; it comes from the Kubernetes apt repository (or
  # the Google Cloud SDK one). Say so plainly instead of failing inside apt-get.
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
fi

# npm packages, exactly as package-lock.json pins them (integrity hashes included), into
# ./node_modules. Skipped when that lock file was already installed, and in the agent
# image's build context, which leaves the lock out (it builds only uplink-agent).
root=$(cd "$(dirname "$0")/.." && pwd)
[[ -f "$root/package-lock.json" ]] || exit 0
stamp="$root/node_modules/.uplink-lock.sha256"
want=$(sha256sum "$root/package-lock.json" | cut -d' ' -f1)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "deps: npm ci (package-lock.json)" >&2
  if ! (cd "$root" && npm ci --no-audit --no-fund --loglevel=error >/tmp/uplink-npm.log 2>&1); then
    cat /tmp/uplink-npm.log >&2
    echo "deps: npm ci failed (log above)" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
