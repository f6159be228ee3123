#!/bin/sh
# Packages a Helm chart directory the way `helm package` lays it out, reproducibly:
#
#   package_chart.sh CHART_DIR VERSION OUT.tgz
#
# A gzip'd tar of the chart's regular files (hidden ones left out), each under
# CHART_NAME/, in byte order of their names, owned by 0:0, mode 0644 (0755 when executable),
# all with one fixed time, and gzip without a name or time: the same sources always give
# the same bytes, so the digest the console's index.yaml lists is the same on every build.
# VERSION must be Chart.yaml's version (the project's), so a stale chart fails the build.
set -eu
if [ $# -ne 3 ]; then
  echo "usage: package_chart.sh CHART_DIR VERSION OUT.tgz" >&2
  exit 2
fi
dir=$(cd "$1" && pwd)
version=$2
out=$3
name=$(basename "$dir")
if ! grep -qx "version: $version" "$dir/Chart.yaml"; then
  echo "package_chart.sh: $dir/Chart.yaml does not say 'version: $version'" >&2
  exit 1
fi
# 2000-01-01T00:00:00Z: a fixed time tar does not call implausibly old.
mtime=946684800
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$dir/.." && find "$name" -type f ! -name '.*' | LC_ALL=C sort) |
  tar -C "$dir/.." --no-recursion --files-from=- --format=ustar --owner=0 --group=0 \
      --numeric-owner --mtime=@$mtime --mode='u=rwX,go=rX' -cf - |
  gzip -9 -n > "$tmp"
mv "$tmp" "$out"
trap - EXIT
