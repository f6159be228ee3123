#!/usr/bin/env bash
# `make images REGISTRY=HOST[:PORT]/PATH`: builds the uplink-agent and uplink-agent-cluster
# images with podman from deploy/docker/Dockerfile and pushes them to REGISTRY (README.md
# here).
#
#   images.sh BUILD_DIR REGISTRY
#
# The agent is the one the project's own build made on this machine (make images builds it
# first): a Debian 12 build, so it runs on a Debian 12 base, and nothing but Debian's archive
# is needed. The base is BASE_IMAGE when set (REPOSITORY@sha256:..., e.g. the Dockerfile's
# distroless default), else one made from Debian's archive by debian-base.sh (cached under
# ${XDG_CACHE_HOME:-~/.cache}/uplink/images, keyed by its package list), pushed to REGISTRY
# first so that the build names it by digest. kubectl for the cluster image is KUBECTL when
# set, else the kubectl on PATH.
#
# Writes BUILD_DIR/images/images.env (UPLINK_AGENT_IMAGE and UPLINK_AGENT_CLUSTER_IMAGE, by
# digest) and prints the console flags that make install commands pin them.
#
# Environment: BASE_IMAGE, KUBECTL; for the tests, UPLINK_IMAGES_STORAGE=DIR (a podman storage
# of its own) and UPLINK_IMAGES_WORK=DIR (instead of BUILD_DIR/images). A loopback REGISTRY is
# spoken to without TLS.
set -euo pipefail
shopt -s inherit_errexit

if [[ $# -ne 2 || -z "$2" ]]; then
  echo "make images needs REGISTRY=HOST[:PORT]/PATH, the registry to push the images to," >&2
  echo "e.g. make images REGISTRY=registry.example.com:5000/uplink" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
registry=${2%/}
root=$(cd "$(dirname "$0")/../.." && pwd)
version=$(sed -n 's/^project(uplink VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
if [[ ! "$registry" =~ ^[a-zA-Z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+$ ]]; then
  echo "images: REGISTRY must be HOST[:PORT]/PATH (lower-case path), not '$registry'" >&2
  exit 2
fi
for tool in podman mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "images: $tool is missing: run make deps" >&2; exit 1; }
done
agent="$build_dir/bin/uplink-agent"
[[ -x "$agent" ]] || { echo "images: $agent is missing: run make build" >&2; exit 1; }

# shellcheck source=podman-setup.sh
. "$root/deploy/docker/podman-setup.sh"
tls=()
case "${registry%%/*}" in
  localhost|localhost:*|127.*|\[::1\]*) tls=(--tls-verify=false) ;;
esac

work=${UPLINK_IMAGES_WORK:-$build_dir/images}
rm -rf "$work/context"
mkdir -p "$work/context"
# The context holds only what the build takes. The Dockerfile is read from a copy: podman
# would apply the ignore file beside the original, which is for the repository as context.
cp "$root/deploy/docker/Dockerfile" "$work/Dockerfile"

# 1. The base, by digest.
base=${BASE_IMAGE:-}
if [[ -z "$base" ]]; then
  packages=ca-certificates,libssl3,libyaml-0-2,zlib1g
  # "nonroot", 65532, as in the distroless base and the chart's runAsUser (above useradd's
  # usual range, which -K widens).
  user_hook='chroot "$1" useradd -K UID_MAX=65533 -K GID_MAX=65533 --uid 65532 --user-group --create-home --home-dir /home/nonroot --shell /usr/sbin/nologin nonroot'
  base_built=$("$root/deploy/docker/debian-base.sh" "$packages" "$user_hook")
  read -r tarball key <<< "$base_built"
  local_base="localhost/uplink-agent-base:$key"
  "${podman[@]}" image exists "$local_base" ||
    "${podman[@]}" import --quiet "$tarball" "$local_base" >/dev/null
  "${podman[@]}" push --quiet "${tls[@]}" --digestfile "$work/base.digest" "$local_base" \
    "$registry/uplink-agent-base:$key"
  base="$registry/uplink-agent-base@$(cat "$work/base.digest")"
fi
if [[ ! "$base" =~ @sha256:[a-f0-9]{64}$ ]]; then
  echo "images: BASE_IMAGE must be pinned by digest (REPOSITORY@sha256:...), not '$base'" >&2
  exit 2
fi

# 2. The context: the agent's tree and kubectl, nothing else.
sh "$root/deploy/docker/runtime-tree.sh" "$agent" "$work/context/rootfs"
kubectl=${KUBECTL:-$(command -v kubectl || true)}
[[ -n "$kubectl" ]] || { echo "images: no kubectl on PATH: set KUBECTL=PATH" >&2; exit 1; }
kubectl=$(readlink -f "$kubectl")
# The Google Cloud SDK's kubectl package installs a dispatcher that runs a versioned binary
# beside it; the image needs that binary itself.
client=$("$kubectl" version --client 2>/dev/null | sed -n 's/^Client Version: v\([0-9]*\.[0-9]*\).*-dispatcher$/\1/p')
if [[ -n "$client" ]]; then kubectl="$(dirname "$kubectl")/kubectl.$client"; fi
install -m 0755 "$kubectl" "$work/context/kubectl"

# 3. Build, push, and note the digests.
build() {  # TARGET IMAGE
  "${podman[@]}" build --quiet "${limits[@]}" "${tls[@]}" --pull=missing \
    -f "$work/Dockerfile" --target "$1" \
    --build-arg "BASE_IMAGE=$base" --build-arg AGENT_FROM=prebuilt \
    --build-arg KUBECTL_FROM=kubectl-prebuilt --build-arg "TARGETARCH=$(dpkg --print-architecture)" \
    -t "$2:$version" "$work/context" >/dev/null
  "${podman[@]}" push --quiet "${tls[@]}" --digestfile "$work/$1.digest" "$2:$version"
  echo "$2@$(cat "$work/$1.digest")"
}
agent_image=$(build agent "$registry/uplink-agent")
cluster_image=$(build cluster "$registry/uplink-agent-cluster")
printf 'UPLINK_AGENT_IMAGE=%s\nUPLINK_AGENT_CLUSTER_IMAGE=%s\n' "$agent_image" "$cluster_image" \
  > "$work/images.env"

cat <<EOF
Pushed (base $base, kubectl $("$work/context/kubectl" version --client 2>/dev/null | head -1)):
  $agent_image
  $cluster_image
Written to $work/images.env. Install commands pin them when the console is started with:
  uplink-console serve ... --agent-image $agent_image \\
      --agent-cluster-image $cluster_image
EOF
