#!/usr/bin/env bash
# `make demo` end to end: the demo starts the simulated cluster, the console and the agents,
# prints the URL, the admin password and key; the connection it made is connected, each of
# the inventory's nodes sends node samples under its name, the console's pages and chart
# repository answer; stopping it stops every process and removes
# the demo's files. The test stops it with SIGTERM, which the demo handles as it does Ctrl-C:
# a background job of a script starts with SIGINT ignored, and bash cannot trap it then.
set -euo pipefail
demo="$1" bin="$2"
work=$(mktemp -d)
demo_pid=""
cleanup() {
  [[ -n "$demo_pid" ]] && kill -TERM "$demo_pid" 2>/dev/null && wait "$demo_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "demo_test: $1" >&2; echo "--- demo output:" >&2; cat "$work/out" >&2; exit 1; }

# A free port: one nothing answers on.
for port in $(shuf -i 20000-60000 -n 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
done

TMPDIR="$work" UPLINK_DEMO_PORT=$port "$demo" "$bin" >"$work/out" 2>&1 &
demo_pid=$!
for _ in $(seq 1 900); do
  grep -q 'uplink demo is running' "$work/out" && break
  kill -0 "$demo_pid" 2>/dev/null || fail "the demo exited before it was running"
  sleep 0.2
done
grep -q 'uplink demo is running' "$work/out" || fail "the demo did not start within 180 s"

url=$(sed -n 's/^  Console URL: *\(http[^ ]*\).*/\1/p' "$work/out")
key=$(sed -n 's/^  Admin API key: *\(uk_[A-Za-z0-9_-]*\).*/\1/p' "$work/out")
password=$(sed -n 's/^  Admin password: *\([^ ]*\).*/\1/p' "$work/out")
[[ "$url" == "http://127.0.0.1:$port" ]] || fail "no console URL printed"
[[ -n "$key" && -n "$password" ]] || fail "no admin key or password printed"

printf 'Authorization: Bearer %s\n' "$key" >"$work/header"
connections=$(curl -sf -H @"$work/header" "$url/api/v1/connections") || fail "the API refused the key"
grep -q '"liveness":"connected"' <<<"$connections" || fail "the demo's connection is not connected: $connections"
curl -sf "$url/" | grep -qi '<html' || fail "the web console does not answer"
curl -sf "$url/charts/index.yaml" | grep -q 'uplink-agent' || fail "the chart repository does not answer"
curl -sf "$url/readyz" >/dev/null || fail "the console is not ready"

# Every GPU node of the inventory sends node samples under its own name, and no sample comes
# from a name the inventory does not have: every node row of the web console has charts.
id=$(node -e 'const c = JSON.parse(process.argv[1]).connections; console.log(c[0].id)' "$connections")
telemetry_matches() {
  local shown samples
  shown=$(curl -sf -H @"$work/header" "$url/api/v1/connections/$id") || return 1
  samples=$(curl -sf -H @"$work/header" "$url/api/v1/connections/$id/nodes?limit=500") || return 1
  node -e '
    const inventory = JSON.parse(process.argv[1]).nodes.map((n) => n.name).sort();
    const sampled = JSON.parse(process.argv[2]).nodes.map((n) => n.node).sort();
    process.exit(inventory.length > 0 && JSON.stringify(inventory) === JSON.stringify(sampled) ? 0 : 1);
  ' "$shown" "$samples"
}
for _ in $(seq 1 300); do telemetry_matches && break; sleep 0.2; done
telemetry_matches || fail "node samples do not come from the inventory's nodes: $(curl -sf -H @"$work/header" "$url/api/v1/connections/$id/nodes")"

demo_dir=$(sed -n 's/^Logs are in \(.*\)\. Press Ctrl-C to stop\./\1/p' "$work/out")
[[ -d "$demo_dir" ]] || fail "no demo directory printed"
kill -TERM "$demo_pid"
wait "$demo_pid" 2>/dev/null || true
demo_pid=""
[[ ! -e "$demo_dir" ]] || fail "stopping left the demo's files in $demo_dir"
if curl -s -o /dev/null "$url/healthz"; then fail "the console still answers after the demo stopped"; fi
echo "demo_test: the demo ran, answered and stopped cleanly"
