#!/usr/bin/env bash
# The workspace image reservations run in: Debian 12 minbase with python3 and OpenSSH (not
# started: deploy/workspace/Dockerfile adds the SSH configuration on it), and the user
# "workspace" (UID and GID 1000) it runs as by default. Built with podman from a base that
# debian-base.sh makes, once per machine: podman's storage keeps it under a tag keyed by what
# goes in it, so later runs only look it up.
#
#   workspace-image.sh
#
# Prints the image by digest (localhost/uplink-workspace@sha256:...), which a pod names as
# its image. Environment: UPLINK_IMAGES_STORAGE=DIR for a podman storage of its own (as
# images.sh).
set -euo pipefail
shopt -s inherit_errexit

root=$(cd "$(dirname "$0")/../.." && pwd)
command -v podman >/dev/null || { echo "workspace-image: podman is missing: run make deps" >&2; exit 1; }
# shellcheck source=podman-setup.sh
. "$root/deploy/docker/podman-setup.sh"

base_built=$("$root/deploy/docker/debian-base.sh" python3,openssh-server)
read -r tarball base_key <<< "$base_built"
base="localhost/uplink-workspace-base:$base_key"
containerfile="FROM $base
RUN useradd --uid 1000 --user-group --create-home --home-dir /home/workspace --shell /bin/bash workspace
USER 1000:1000
WORKDIR /home/workspace
"
key=$(printf '%s' "$containerfile" | sha256sum | cut -c1-16)
image="localhost/uplink-workspace:$key"
if ! "${podman[@]}" image exists "$image"; then
  echo "workspace-image: building $image with podman, once" >&2
  "${podman[@]}" image exists "$base" || "${podman[@]}" import --quiet "$tarball" "$base" >/dev/null
  context=$(mktemp -d)
  trap 'rm -rf "$context"' EXIT
  printf '%s' "$containerfile" > "$context/Containerfile"
  "${podman[@]}" build --quiet --pull=never --network=none "${limits[@]}" \
    -f "$context/Containerfile" -t "$image" "$context" >/dev/null
fi
digest=$("${podman[@]}" image inspect --format '{{.Digest}}' "$image")
echo "localhost/uplink-workspace@$digest"
