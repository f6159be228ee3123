#!/usr/bin/env bash
# The self-containment check catches each spelling of a path outside the tree, and nothing
# that only looks like one.
set -euo pipefail
check="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

expect() {  # expect PASS|FAIL TEXT
  rm -rf "$dir"/* && mkdir -p "$dir/sub" && printf '%s\n' "$2" > "$dir/sub/file"
  if "$check" "$dir" >/dev/null 2>&1; then got=PASS; else got=FAIL; fi
  [[ "$got" == "$1" ]] || { echo "expected $1 for: $2 (got $got)" >&2; exit 1; }
}

# The offending paths are put together here, so that this file does not refer outside.
up=.. shared=shared
expect FAIL "UPLINK_FIXTURES_DIR=\"\${CMAKE_SOURCE_DIR}/$up/$shared/fixtures\""
expect FAIL "see $up/$up/$shared/reference/peers.md"
expect FAIL "path = '$up/$shared'"
expect FAIL "cp -r $up//$shared/fixtures x"
expect FAIL "# /work/$shared/fixtures/kubernetes"
expect PASS "std::shared_ptr<int> p; $up/${shared}_state; $shared/fixtures"
expect PASS 'nothing here'
echo "check_self_contained: all cases behave"
