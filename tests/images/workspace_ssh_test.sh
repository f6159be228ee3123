#!/usr/bin/env bash
# The workspace SSH image (deploy/workspace) for real:
#
#   workspace_ssh_test.sh SOURCE_DIR
#
# 1. `sshd -T -f deploy/workspace/sshd_config` on this machine: every rule the file promises.
# 2. The image built with podman on the workspace image (deploy/docker/workspace-image.sh) by
#    digest; a base named by tag is refused.
# 3. In the container, locked down as a workspace pod runs (UID 1000, read-only root, every
#    capability dropped, no network, scratch a 1777 tmpfs): no host key baked in, `sshd -t`
#    passes with a generated host key, and real ssh logs in through `sshd -i` (as the
#    controller will start it): a command runs as 1000, a local forward to the workspace's
#    loopback works; a forward elsewhere, a remote forward, agent forwarding, root, a
#    password and a key not in authorized_keys are refused.
set -euo pipefail
shopt -s inherit_errexit
src=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
# shellcheck source=../../deploy/docker/podman-setup.sh
. "$src/deploy/docker/podman-setup.sh"
container=""
agent_pid=""
cleanup() {
  local rc=$?
  [[ -n "$container" ]] && "${podman[@]}" rm --force --time 0 "$container" >/dev/null 2>&1
  [[ -n "$agent_pid" ]] && kill "$agent_pid" 2>/dev/null
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

# 1. The effective configuration. sshd -T needs a loadable host key (the configured one lives
# in a workspace's scratch) and, as root, a privilege separation directory: run it as nobody.
chmod 755 "$tmp"
ssh-keygen -q -t ed25519 -N '' -f "$tmp/host_key"
chown nobody "$tmp/host_key"
effective=$(setpriv --reuid nobody --regid nogroup --clear-groups \
  /usr/sbin/sshd -T -f "$src/deploy/workspace/sshd_config" -h "$tmp/host_key" 2>/dev/null) ||
  fail "sshd -T refuses deploy/workspace/sshd_config"
expect() {  # KEY VALUE: sshd -T prints "key value"
  grep -qxF "$1 $2" <<< "$effective" || fail "sshd -T: expected '$1 $2', got '$(grep "^$1 " <<< "$effective")'"
}
expect permitrootlogin no
expect authenticationmethods publickey
expect pubkeyauthentication yes
expect pubkeyacceptedalgorithms ssh-ed25519,ecdsa-sha2-nistp256,ecdsa-sha2-nistp384,ecdsa-sha2-nistp521
expect passwordauthentication no
expect kbdinteractiveauthentication no
expect permitemptypasswords no
expect hostbasedauthentication no
expect gssapiauthentication no
expect kerberosauthentication no
expect allowagentforwarding no
expect x11forwarding no
expect permittunnel no
expect allowtcpforwarding local
expect permitlisten none
expect "permitopen" "localhost:* 127.0.0.1:* [::1]:*"
expect gatewayports no
expect allowstreamlocalforwarding no
expect permituserenvironment no
expect permituserrc no
expect subsystem "sftp internal-sftp"
expect logingracetime 20
expect maxauthtries 3
expect hostkey /scratch/.uplink-ssh/host_ed25519_key
expect authorizedkeysfile /scratch/.uplink-ssh/authorized_keys

# 2. The image, on the workspace image by digest; a tag is refused.
base=$("$src/deploy/docker/workspace-image.sh")
image=$("$src/deploy/workspace/image.sh" "$base") || fail "the workspace ssh image does not build"
tagged="${base%@*}:latest"
"${podman[@]}" tag "$base" "$tagged"
if refusal=$("$src/deploy/workspace/image.sh" "$tagged" 2>&1); then
  fail "a base image named by tag was accepted"
fi
grep -q "BASE_IMAGE must be pinned by digest" <<< "$refusal" || fail "unclear refusal of a tag: $refusal"

# 3. The container as a workspace pod runs it.
container=$("${podman[@]}" run --detach "${limits[@]}" --user 1000:1000 --read-only \
  --read-only-tmpfs=false --cap-drop ALL --security-opt no-new-privileges --network none \
  --mount type=tmpfs,destination=/scratch,tmpfs-mode=1777 "$image" sleep infinity)
inside() { "${podman[@]}" exec -i "$container" "$@"; }
[[ "$(inside id -u)" == 1000 ]] || fail "the image does not run as UID 1000"
leftover=$(inside sh -c 'ls /etc/ssh/ssh_host_* 2>/dev/null || true')
[[ -z "$leftover" ]] || fail "host keys baked into the image: $leftover"
inside touch /etc/probe 2>/dev/null && fail "the root filesystem is writable"
inside sh -c 'mkdir -m 700 /scratch/.uplink-ssh &&
  ssh-keygen -q -t ed25519 -N "" -f /scratch/.uplink-ssh/host_ed25519_key' ||
  fail "no host key could be made in scratch"
inside /usr/sbin/sshd -t -f /etc/ssh/sshd_config || fail "sshd -t fails in the container as UID 1000"

# Real ssh through `sshd -i`, the host key pinned.
ssh-keygen -q -t ed25519 -N '' -C granted -f "$tmp/granted"
ssh-keygen -q -t ecdsa -b 384 -N '' -C stranger -f "$tmp/stranger"
inside sh -c 'cat > /scratch/.uplink-ssh/authorized_keys' < "$tmp/granted.pub"
echo "workspace $(inside cat /scratch/.uplink-ssh/host_ed25519_key.pub)" > "$tmp/known_hosts"
printf '#!/bin/sh\nexec %s exec -i %s /usr/sbin/sshd -i -f /etc/ssh/sshd_config\n' \
  "${podman[*]}" "$container" > "$tmp/proxy"
chmod +x "$tmp/proxy"
user=$(inside id -un)
ssh_to() {  # IDENTITY ARGS...
  local identity=$1
  shift
  ssh -F none -o BatchMode=yes -o IdentitiesOnly=yes -i "$identity" -o ProxyCommand="$tmp/proxy" \
    -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$tmp/known_hosts" -o ConnectTimeout=60 "$@"
}
[[ "$(ssh_to "$tmp/granted" "$user@workspace" id -u)" == 1000 ]] || fail "a granted key cannot run a command"
ssh_to "$tmp/stranger" "$user@workspace" true 2>/dev/null && fail "a key without a grant logged in"
ssh_to "$tmp/granted" "root@workspace" true 2>/dev/null && fail "root logged in"
ssh -F none -o BatchMode=yes -o PreferredAuthentications=password,keyboard-interactive \
  -o ProxyCommand="$tmp/proxy" -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$tmp/known_hosts" \
  "$user@workspace" true 2>/dev/null && fail "a login without a key succeeded"

# A local forward to the workspace's loopback (ssh -W is the same direct-tcpip channel as -L).
inside sh -c 'cd /scratch && exec python3 -m http.server --bind 0.0.0.0 8000 >/dev/null 2>&1' &
for _ in $(seq 100); do
  reply=$(printf 'GET / HTTP/1.0\r\n\r\n' | ssh_to "$tmp/granted" -W 127.0.0.1:8000 "$user@workspace" 2>/dev/null || true)
  [[ "$reply" == HTTP/1.0\ 200* ]] && break
  sleep 0.1
done
[[ "$reply" == HTTP/1.0\ 200* ]] || fail "a local forward to the workspace's loopback does not work: '$reply'"
# The server listens on all of 127/8, so only PermitOpen stands between a client and 127.0.0.2.
reply=$(printf 'GET / HTTP/1.0\r\n\r\n' | ssh_to "$tmp/granted" -W 127.0.0.2:8000 "$user@workspace" 2>/dev/null || true)
[[ -z "$reply" ]] || fail "a forward to an address PermitOpen does not list was allowed"
ssh_to "$tmp/granted" -o ExitOnForwardFailure=yes -R 127.0.0.1:0:127.0.0.1:22 "$user@workspace" true \
  2>/dev/null && fail "a remote forward was allowed"
eval "$(ssh-agent -s)" >/dev/null
agent_pid=$SSH_AGENT_PID
ssh-add -q "$tmp/granted" 2>/dev/null
forwarded=$(ssh_to "$tmp/granted" -A "$user@workspace" 'echo "${SSH_AUTH_SOCK:-none}"')
[[ "$forwarded" == none ]] || fail "agent forwarding was allowed: $forwarded"
echo "PASS: workspace ssh image"
