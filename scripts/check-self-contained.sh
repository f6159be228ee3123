#!/usr/bin/env bash
# Fails when a file of the tree refers to a path outside it: the project's shared folder
# beside the checkout, which a user's clone does not have. Everything a test, a script or
# the demo reads must be inside the repository (tests/fixtures/ for test data).
#
# Usage: check-self-contained.sh [ROOT]   (default: the repository this script is in)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# Written as a bracket expression so that this file does not match itself.
pattern='([.][.]/+|/work/+)shared([/"'"'"'[:space:]]|$)'

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  list_files() { git ls-files -z --cached --others --exclude-standard; }
else
  list_files() { find . -path ./build -prune -o -path ./node_modules -prune -o -type f -print0; }
fi

hits=$(list_files | xargs -0 -r grep -I -n -E -- "$pattern" 2>/dev/null || true)
if [[ -n "$hits" ]]; then
  echo "These lines refer to the shared folder outside the repository, which a clone does not" >&2
  echo "have; copy what they need into the tree (test data into tests/fixtures/ with its" >&2
  echo "SOURCES.md) and refer to that instead:" >&2
  printf '%s\n' "$hits" >&2
  exit 1
fi
echo "self-contained: no file refers outside the repository"
