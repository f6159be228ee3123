#!/bin/sh
# The files the agent image adds to its base, under OUT_DIR:
#
#   runtime-tree.sh AGENT_BINARY OUT_DIR
#
# the agent, coreutils' install (the node DaemonSet's spool-owner init container), and the
# shared libraries they need beyond glibc, libssl and libcrypto, which every base the images
# use provides (the agent loads libssl.so.3 at its first TLS connection:
# src/net/tls_library.h). The Dockerfile's build stage and `make images` both run it, so an
# image holds the same tree whichever built the agent.
set -eu
if [ $# -ne 2 ]; then
  echo "usage: runtime-tree.sh AGENT_BINARY OUT_DIR" >&2
  exit 2
fi
agent=$1
out=$2
mkdir -p "$out/usr/local/bin" "$out/usr/bin"
install -m 0755 "$agent" "$out/usr/local/bin/uplink-agent"
install -m 0755 /usr/bin/install "$out/usr/bin/install"
for lib in $(ldd "$agent" /usr/bin/install | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|ld-linux*|libssl.so.*|libcrypto.so.*) ;;
    *)
      # Under the library's real directory (/usr/lib/<multiarch>), never /lib: on a
      # merged-/usr base /lib is a link that a copied directory must not replace.
      dir="$out$(dirname "$(readlink -f "$lib")")"
      mkdir -p "$dir"
      cp -L "$lib" "$dir/$(basename "$lib")"
      ;;
  esac
done
