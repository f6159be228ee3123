// OpenSSL linked at build time: nothing to load.
#include "net/tls_library.h"

namespace uplink::net {

Status LoadTlsLibrary() { return Status::Ok(); }

bool TlsLibraryLoaded() { return true; }

}  // namespace uplink::net
