#!/usr/bin/env bash
# Builds deploy/workspace/Dockerfile with podman on top of BASE_IMAGE (pinned by digest) and
# prints the result by digest (localhost/uplink-workspace-ssh@sha256:...). Podman's storage
# keeps it under a tag keyed by the base and this directory's files, so later runs only look
# it up.
#
#   image.sh BASE_IMAGE
#
# Environment: UPLINK_IMAGES_STORAGE=DIR for a podman storage of its own (as images.sh).
set -euo pipefail
shopt -s inherit_errexit

if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: image.sh BASE_IMAGE (pinned by digest: IMAGE@sha256:...)" >&2
  exit 2
fi
base=$1
here=$(cd "$(dirname "$0")" && pwd)
command -v podman >/dev/null || { echo "workspace ssh image: podman is missing: run make deps" >&2; exit 1; }
# shellcheck source=../docker/podman-setup.sh
. "$here/../docker/podman-setup.sh"

key=$(cat "$here/Dockerfile" "$here/sshd_config" <(printf '%s' "$base") | sha256sum | cut -c1-16)
image="localhost/uplink-workspace-ssh:$key"
if ! "${podman[@]}" image exists "$image"; then
  echo "workspace ssh image: building $image with podman, once" >&2
  # The base is local or pulled by its digest; apt inside the build needs the network.
  "${podman[@]}" build --quiet --pull=missing "${limits[@]}" --build-arg "BASE_IMAGE=$base" \
    -f "$here/Dockerfile" -t "$image" "$here" >/dev/null
fi
digest=$("${podman[@]}" image inspect --format '{{.Digest}}' "$image")
echo "localhost/uplink-workspace-ssh@$digest"
