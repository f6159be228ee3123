#!/usr/bin/env bash
# `make demo`: a simulated GPU cluster (uplink-kubesim), the console, and the inventory agent,
# the cluster agent and a node agent per GPU node, all on loopback. Prints the console URL and
# an admin API key; Ctrl-C stops everything and removes the demo's files.
set -euo pipefail
umask 077  # the demo directory holds the admin key and the agent token

bin=$(cd "${1:-build/bin}" && pwd)
port=${UPLINK_DEMO_PORT:-8080}
nodes=${UPLINK_DEMO_NODES:-4}
gpus=${UPLINK_DEMO_GPUS:-8}
dir=$(mktemp -d "${TMPDIR:-/tmp}/uplink-demo.XXXXXX")
pids=()

cleanup() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
  echo
  echo "demo stopped; its processes and files are gone."
}
trap cleanup EXIT INT TERM

fail() {
  echo "demo: $1" >&2
  [[ -n "${2:-}" && -f "$2" ]] && { echo "--- last lines of $2:" >&2; tail -n 20 "$2" >&2; }
  exit 1
}

wait_for() {  # wait_for SECONDS COMMAND...
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  fail "port $port is in use; run with UPLINK_DEMO_PORT=<free port> make demo"
fi

echo "==> starting a simulated cluster: $nodes GPU nodes x $gpus GPUs (uplink-kubesim)"
"$bin/uplink-kubesim" --listen 127.0.0.1:0 --nodes "$nodes" --gpus-per-node "$gpus" --workloads \
  --kubeconfig-out "$dir/kubeconfig" >"$dir/kubesim.log" 2>&1 &
pids+=($!)
wait_for 30 test -s "$dir/kubeconfig" || fail "kubesim did not start" "$dir/kubesim.log"

echo "==> creating the console's store and admin user"
"$bin/uplink-console" init --data-dir "$dir/console" >"$dir/admin-key" 2>"$dir/console-init.log" ||
  fail "console init failed" "$dir/console-init.log"
admin_key=$(cat "$dir/admin-key")
# For curl: the key goes in a header file, never on a command line other users can read.
printf 'Authorization: Bearer %s\n' "$admin_key" >"$dir/auth-header"
url="http://127.0.0.1:$port"

echo "==> starting the console on $url"
"$bin/uplink-console" serve --data-dir "$dir/console" --listen "127.0.0.1:$port" \
  >"$dir/console.log" 2>&1 &
pids+=($!)
wait_for 30 curl -fsS "$url/healthz" || fail "the console did not start" "$dir/console.log"

echo "==> creating a connection (its agent token goes to a 0600 file, never to the screen)"
UPLINK_API_KEY=$admin_key "$bin/uplink" --console "$url" connections create \
  --agent-name demo-agent --cluster-name demo-gpu-cluster --token-out "$dir/agent-token" >/dev/null ||
  fail "creating the connection failed"

echo "==> creating the agent's status ConfigMap with real kubectl"
kubectl --kubeconfig "$dir/kubeconfig" --cache-dir "$dir/kube-cache" -n uplink-system \
  create configmap uplink-agent-status >/dev/null 2>"$dir/kubectl.log" ||
  fail "kubectl could not create the ConfigMap" "$dir/kubectl.log"

echo "==> starting the inventory agent"
"$bin/uplink-agent" inventory --console "$url" --token-file "$dir/agent-token" \
  --kubeconfig "$dir/kubeconfig" --namespace uplink-system \
  --status-configmap uplink-agent-status --health-listen 127.0.0.1:0 >"$dir/agent.log" 2>&1 &
pids+=($!)

echo "==> starting the cluster agent (the console's read-only kubectl)"
UPLINK_API_KEY=$admin_key "$bin/uplink" --console "$url" connections namespaces demo-gpu-cluster \
  --all >/dev/null || fail "setting the connection's namespace scope failed"
"$bin/uplink-agent" cluster --console "$url" --token-file "$dir/agent-token" \
  --state-dir "$dir/cluster-spool" --max-bytes 67108864 --listen 127.0.0.1:0 \
  --kubectl "$(command -v kubectl)" \
  --kubeconfig "$dir/kubeconfig" --cache-dir "$dir/kubectl-cache" >"$dir/cluster-agent.log" 2>&1 &
pids+=($!)

# One node agent per GPU node, as the chart's DaemonSet runs them, each under its node's name
# so that every node of the inventory has its charts. This machine's own /proc stands in for
# each node's (the same figures on every node; no GPU here: the GPU collector says so). Every
# spool holds its cap on disk (written ahead while idle), and here they all share one disk:
# 64 MiB each instead of 512 MiB, as for the cluster agent above.
gpu_nodes=$(kubectl --kubeconfig "$dir/kubeconfig" --cache-dir "$dir/kube-cache" get nodes \
  -l nvidia.com/gpu.present=true -o 'jsonpath={.items[*].metadata.name}' 2>>"$dir/kubectl.log") ||
  fail "kubectl could not list the cluster's GPU nodes" "$dir/kubectl.log"
echo "==> starting a node agent on each GPU node: $gpu_nodes"
for node in $gpu_nodes; do
  "$bin/uplink-agent" node --console "$url" --token-file "$dir/agent-token" \
    --state-dir "$dir/node-spool-$node" --max-bytes 67108864 --node-name "$node" \
    --listen 127.0.0.1:0 \
    >"$dir/node-agent-$node.log" 2>&1 &
  pids+=($!)
done

reported() {
  curl -sf -H @"$dir/auth-header" "$url/api/v1/connections" | grep -q '"liveness":"connected"'
}
wait_for 30 reported || fail "the agent's first report did not arrive" "$dir/agent.log"

# A password for the web console's sign-in, made here and shown once like the key.
web_password=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
printf '%s\n' "$web_password" | UPLINK_API_KEY=$admin_key "$bin/uplink" --console "$url" \
  users set-password me --password-stdin >/dev/null || fail "setting the admin's password failed"

cat <<EOM

uplink demo is running.

  Console URL:    $url      (web console: sign in as admin@localhost)
  Admin password: $web_password
  Admin API key:  $admin_key

Try:
  export UPLINK_CONSOLE=$url UPLINK_API_KEY=$admin_key
  $bin/uplink connections list
  $bin/uplink connections show demo-gpu-cluster     # nodes, agents, security events
  $bin/uplink audit                                  # who did what, never a secret
  $bin/uplink connections install second-cluster --kubeconfig $dir/kubeconfig --yes
                                                     # a token straight into a Secret, never shown
  curl -s -H @$dir/auth-header $url/api/v1/connections
  curl -s $url/charts/index.yaml                     # the agent's chart, a Helm repository
  kubectl --kubeconfig $dir/kubeconfig get nodes      # the simulated cluster
  $bin/uplink kubectl demo-gpu-cluster -- get pods -A  # read-only kubectl through the agent

Logs are in $dir. Press Ctrl-C to stop.

EOM
UPLINK_API_KEY=$admin_key "$bin/uplink" --console "$url" connections list
wait
