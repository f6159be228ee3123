#!/usr/bin/env bash
# Builds fuzz/kubectl_guard_fuzz.cc as a libFuzzer binary (clang, with ASan and UBSan) straight
# from the guard's few sources and runs it for a bounded time from the seed corpus. Fails when
# clang or libFuzzer is missing, when the build fails, or when the fuzzer finds an input that
# breaks the property (an accepted argv holding a refused verb, flag or secrets spelling) or
# crashes the guard.
#
#   guard_fuzz_test.sh SOURCE_DIR WORK_DIR SECONDS
set -euo pipefail

source_dir=$1
work_dir=$2
seconds=$3

clang=$(command -v clang++ || true)
if [[ -z "$clang" ]]; then
  echo "guard_fuzz_test: clang++ is not installed; this test builds the kubectl guard's" \
       "libFuzzer target with it (Debian packages: clang, libclang-rt-14-dev)" >&2
  exit 1
fi

sources=(
  "$source_dir/fuzz/kubectl_guard_fuzz.cc"
  "$source_dir/src/kubectl/guard.cc"
  "$source_dir/src/common/kubernetes_names.cc"
  "$source_dir/src/common/status.cc"
  "$source_dir/src/common/text.cc"
)
headers=(
  "$source_dir/fuzz/fuzz_check.h"
  "$source_dir/src/kubectl/guard.h"
  "$source_dir/src/common/kubernetes_names.h"
  "$source_dir/src/common/status.h"
  "$source_dir/src/common/text.h"
)
mkdir -p "$work_dir"
binary="$work_dir/kubectl_guard_fuzz"

# Rebuilt only when a source or header is newer than the binary.
rebuild=0
[[ -x "$binary" ]] || rebuild=1
for file in "${sources[@]}" "${headers[@]}"; do
  [[ "$file" -nt "$binary" ]] && rebuild=1
done
if [[ $rebuild -eq 1 ]]; then
  if ! "$clang" -std=c++20 -O1 -g -fno-omit-frame-pointer \
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
       -I "$source_dir/src" -I "$source_dir/fuzz" "${sources[@]}" -o "$binary.tmp" \
       2> "$work_dir/build.log"; then
    cat "$work_dir/build.log" >&2
    if grep -q "libclang_rt.fuzzer" "$work_dir/build.log"; then
      echo "guard_fuzz_test: libFuzzer's runtime is missing (Debian: libclang-rt-14-dev)" >&2
    fi
    echo "guard_fuzz_test: building the libFuzzer target failed" >&2
    exit 1
  fi
  mv "$binary.tmp" "$binary"
fi

# New inputs go to a corpus of this build's own; the checked-in seeds are only read.
corpus="$work_dir/corpus"
mkdir -p "$corpus"
rm -f "$work_dir"/crash-* "$work_dir"/leak-* "$work_dir"/timeout-* "$work_dir"/oom-*
status=0
"$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=2048 \
  -dict="$source_dir/fuzz/kubectl_guard.dict" -artifact_prefix="$work_dir/" \
  -print_final_stats=1 "$corpus" "$source_dir/fuzz/corpus/kubectl_guard" \
  > "$work_dir/fuzz.log" 2>&1 || status=$?
grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$work_dir/fuzz.log" || true
if [[ $status -ne 0 ]]; then
  tail -n 60 "$work_dir/fuzz.log" >&2
  for artifact in "$work_dir"/crash-* "$work_dir"/timeout-* "$work_dir"/oom-*; do
    [[ -e "$artifact" ]] || continue
    echo "guard_fuzz_test: failing input $artifact, one argument per line:" >&2
    od -c "$artifact" | head -n 20 >&2
  done
  echo "guard_fuzz_test: the fuzzer failed (exit $status)" >&2
  exit 1
fi
if ! grep -q "^Done " "$work_dir/fuzz.log"; then
  tail -n 20 "$work_dir/fuzz.log" >&2
  echo "guard_fuzz_test: the fuzzer did not report a finished run" >&2
  exit 1
fi
