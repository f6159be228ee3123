# Sourced by images.sh and workspace-image.sh: how podman runs on Debian 12 and on machines
# with hybrid cgroups and no systemd. Sets `podman` (the command: runc, since crun refuses
# hybrid cgroups; the cgroupfs manager; a storage of its own when UPLINK_IMAGES_STORAGE=DIR,
# libpod's state directory included: its default, /run/libpod, is shared by every podman on the
# machine, and the storage records it at creation, so a `system reset` of this storage would
# delete it under them)
# and `limits` (--ulimit flags within this process's own hard limits: podman's defaults may
# exceed them, and then no container starts).
podman=(podman --runtime /usr/sbin/runc --cgroup-manager cgroupfs)
if [[ -n "${UPLINK_IMAGES_STORAGE:-}" ]]; then
  podman+=(--root "$UPLINK_IMAGES_STORAGE/root" --runroot "$UPLINK_IMAGES_STORAGE/run"
           --tmpdir "$UPLINK_IMAGES_STORAGE/tmp")
fi
bounded() {  # LIMIT_FLAG CAP: the hard limit, at most CAP
  local hard
  hard=$(ulimit "-H$1")
  [[ "$hard" == unlimited || "$hard" -gt "$2" ]] && hard=$2
  echo "$hard"
}
files=$(bounded n 65536)
processes=$(bounded u 8192)
limits=(--ulimit "nofile=$files:$files" --ulimit "nproc=$processes:$processes")
