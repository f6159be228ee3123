// Where OpenSSL comes from. Every binary links it, except the agent, which loads libssl and
// libcrypto at its first TLS use (openssl_on_demand.cc): its node role runs on every node,
// and as a standalone exporter or with a plain-http console it never speaks TLS, so the
// libraries' 1.7 MiB of mapped and relocated pages stay out of its resident set.
// A binary picks the on-demand loader with the CMake target property UPLINK_OPENSSL_ON_DEMAND.
#pragma once

#include "common/status.h"

namespace uplink::net {

// Makes OpenSSL callable: a no-op where it is linked; where it is loaded on demand, loads it
// once (thread-safe) or says why it cannot. Call before the first OpenSSL function, so that a
// missing library is a clear error rather than an abort inside the first call.
Status LoadTlsLibrary();

// Whether libssl is in this process now (always, where it is linked). For tests and /metrics.
bool TlsLibraryLoaded();

}  // namespace uplink::net
