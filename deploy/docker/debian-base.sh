#!/usr/bin/env bash
# A Debian 12 minbase root filesystem as a tarball, made with mmdebstrap from Debian's archive
# once per machine and cached under ${XDG_CACHE_HOME:-~/.cache}/uplink/images, keyed by what
# goes in it. Used by images.sh (the agent images' base) and workspace-image.sh (the workspace
# image's).
#
#   debian-base.sh PACKAGES [CUSTOMIZE_HOOK]
#
# PACKAGES is mmdebstrap's comma-separated --include list; CUSTOMIZE_HOOK an optional
# --customize-hook command ("$1" is the root). Prints the tarball's path and its key:
#   /root/.cache/uplink/images/debian-base-0123456789abcdef.tar 0123456789abcdef
set -euo pipefail
shopt -s inherit_errexit

if [[ $# -lt 1 || $# -gt 2 || -z "$1" ]]; then
  echo "usage: debian-base.sh PACKAGES [CUSTOMIZE_HOOK]" >&2
  exit 2
fi
packages=$1
hook=${2:-}
command -v mmdebstrap >/dev/null || { echo "debian-base: mmdebstrap is missing: run make deps" >&2; exit 1; }

key=$(printf '%s\n' bookworm minbase "$packages" "$hook" | sha256sum | cut -c1-16)
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
cache="${XDG_CACHE_HOME:-$home/.cache}/uplink/images"
tarball="$cache/debian-base-$key.tar"
if [[ ! -f "$tarball" ]]; then
  echo "debian-base: making the Debian 12 base ($packages) with mmdebstrap, once" >&2
  mkdir -p "$cache"
  hooks=()
  [[ -n "$hook" ]] && hooks=(--customize-hook="$hook")
  # A partial file of this run's own, renamed into place: concurrent builds of the same base
  # each finish with the same result.
  partial=$(mktemp "$tarball.partial.XXXXXX")
  trap 'rm -f "$partial"' EXIT
  mmdebstrap --quiet --format=tar --variant=minbase --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' "${hooks[@]}" bookworm "$partial"
  mv "$partial" "$tarball"
  trap - EXIT
fi
echo "$tarball $key"
