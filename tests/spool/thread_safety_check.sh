#!/bin/sh
# Checks lock rules (src/spool/mutex.h) with clang's thread-safety analysis, syntax only.
#   thread_safety_check.sh CLANGXX SOURCE_ROOT FILE...
#     passes when clang accepts every FILE under -Wthread-safety -Werror;
#   thread_safety_check.sh --expect-rejected 'DIAGNOSTIC|DIAGNOSTIC...' CLANGXX SOURCE_ROOT FILE
#     passes when clang rejects FILE with each DIAGNOSTIC (a fixed string) among its errors:
#     the check itself is checked on code that breaks the rules on purpose.
set -u
expected=""
if [ "${1:-}" = "--expect-rejected" ]; then
  expected=$2
  shift 2
fi
clangxx=$1
root=$2
shift 2
if [ -z "$clangxx" ] || ! command -v "$clangxx" >/dev/null 2>&1; then
  echo "thread_safety_check: clang++ not found ('$clangxx'); scripts/deps.sh installs it" >&2
  exit 1
fi
output=$("$clangxx" -std=c++20 -fsyntax-only -Wthread-safety -Wthread-safety-beta -Werror \
  -I"$root/src" "$@" 2>&1)
status=$?
if [ -z "$expected" ]; then
  [ -n "$output" ] && printf '%s\n' "$output"
  exit $status
fi
if [ $status -eq 0 ]; then
  echo "thread_safety_check: clang accepted $*, which breaks lock rules on purpose" >&2
  exit 1
fi
missing=0
old_ifs=$IFS
IFS='|'
for diagnostic in $expected; do
  case "$output" in
    *"$diagnostic"*) ;;
    *) echo "thread_safety_check: no error saying: $diagnostic" >&2; missing=1 ;;
  esac
done
IFS=$old_ifs
if [ $missing -ne 0 ]; then
  printf '%s\n' "$output" >&2
  exit 1
fi
echo "clang rejected every broken rule"
