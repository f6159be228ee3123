#!/usr/bin/env bash
# make images, end to end:
#
#   images_test.sh SOURCE_DIR BUILD_DIR VERSION
#
# Starts Debian's docker-registry on loopback, runs deploy/docker/images.sh (what `make images`
# runs) against it with a podman storage of its own, then pulls both images by the digests it
# wrote into another fresh storage and runs them as a cluster would: as the image's non-root
# user, read-only root filesystem, every capability dropped, no new privileges, no network.
set -euo pipefail
shopt -s inherit_errexit
src=$1
build=$2
version=$3
tmp=$(mktemp -d)
podman_in() {  # STORAGE ARGS...: podman with a storage of its own, as images.sh runs it
  local storage=$1
  shift
  # --tmpdir too: the reset below deletes the storage's libpod state directory, which would
  # otherwise be /run/libpod, under every other podman on the machine (a test beside this one).
  podman --runtime /usr/sbin/runc --cgroup-manager cgroupfs --root "$storage/root" \
    --runroot "$storage/run" --tmpdir "$storage/tmp" "$@"
}
registry_pid=""
cleanup() {
  local rc=$?
  if [[ -n "$registry_pid" ]]; then kill "$registry_pid" 2>/dev/null || true; fi
  for storage in "$tmp/build-storage" "$tmp/pull-storage"; do
    if [[ -d "$storage" ]]; then podman_in "$storage" system reset --force >/dev/null 2>&1 || true; fi
  done
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A registry on a free loopback port (a port taken between the probe and the start is tried
# again).
port=""
for _ in 1 2 3 4 5; do
  candidate=$((20000 + RANDOM % 30000))
  (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null && continue
  printf 'version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
    "$tmp/registry" "$candidate" > "$tmp/registry.yml"
  docker-registry serve "$tmp/registry.yml" > "$tmp/registry.log" 2>&1 &
  registry_pid=$!
  for _ in $(seq 50); do
    if curl -fsS "http://127.0.0.1:$candidate/v2/" >/dev/null 2>&1; then port=$candidate; break; fi
    kill -0 "$registry_pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$port" ]] && break
  kill "$registry_pid" 2>/dev/null || true
  registry_pid=""
done
[[ -n "$port" ]] || { cat "$tmp/registry.log" >&2; fail "docker-registry did not start"; }
registry="127.0.0.1:$port/uplink-test"

# What `make images REGISTRY=...` runs once the agent is built.
UPLINK_IMAGES_STORAGE="$tmp/build-storage" UPLINK_IMAGES_WORK="$tmp/work" \
  "$src/deploy/docker/images.sh" "$build" "$registry" > "$tmp/images.out"
cat "$tmp/images.out"
# Its podman kept its state in its storage, so the reset at the end touches nothing outside.
[[ -d "$tmp/build-storage/tmp" ]] || fail "images.sh's podman kept libpod's state outside its storage"
# shellcheck source=/dev/null
. "$tmp/work/images.env"
digest='@sha256:[a-f0-9]{64}$'
[[ "$UPLINK_AGENT_IMAGE" =~ ^$registry/uplink-agent$digest ]] || fail "agent image $UPLINK_AGENT_IMAGE"
[[ "$UPLINK_AGENT_CLUSTER_IMAGE" =~ ^$registry/uplink-agent-cluster$digest ]] ||
  fail "cluster image $UPLINK_AGENT_CLUSTER_IMAGE"
grep -qF -- "--agent-image $UPLINK_AGENT_IMAGE" "$tmp/images.out" || fail "no console flags printed"

# Pulled by digest into a storage that has never seen them: the registry serves them.
pull="$tmp/pull-storage"
for image in "$UPLINK_AGENT_IMAGE" "$UPLINK_AGENT_CLUSTER_IMAGE"; do
  podman_in "$pull" pull --quiet --tls-verify=false "$image" >/dev/null || fail "pull $image"
done
locked=(run --rm --ulimit nofile=4096:4096 --ulimit nproc=1024:1024 --read-only --cap-drop ALL
        --security-opt no-new-privileges --network none)

out=$(podman_in "$pull" "${locked[@]}" "$UPLINK_AGENT_IMAGE" --version)
[[ "$out" == "uplink-agent $version" ]] || fail "agent --version said '$out'"
user=$(podman_in "$pull" "${locked[@]}" --entrypoint /usr/bin/id "$UPLINK_AGENT_IMAGE" -u)
[[ "$user" == 65532 ]] || fail "the agent image runs as user $user, not 65532"
caps=$(podman_in "$pull" "${locked[@]}" --entrypoint /usr/bin/grep "$UPLINK_AGENT_IMAGE" CapEff /proc/self/status)
[[ "$caps" =~ CapEff:[[:space:]]+0+$ ]] || fail "capabilities left: $caps"
if podman_in "$pull" "${locked[@]}" --entrypoint /usr/bin/touch "$UPLINK_AGENT_IMAGE" /usr/local/bin/x 2>/dev/null; then
  fail "the root filesystem is writable"
fi
out=$(podman_in "$pull" "${locked[@]}" "$UPLINK_AGENT_CLUSTER_IMAGE" --version)
[[ "$out" == "uplink-agent $version" ]] || fail "cluster image --version said '$out'"
podman_in "$pull" "${locked[@]}" --entrypoint /usr/local/bin/kubectl "$UPLINK_AGENT_CLUSTER_IMAGE" \
  version --client >/dev/null || fail "kubectl does not run in the cluster image"
echo "images_e2e: built, pushed, pulled by digest and ran both images locked down as user 65532"
