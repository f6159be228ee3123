// Generating a private CA and certificates signed by it (OpenSSL 3, EC P-256).
//
// Used by uplink-kubesim (which serves TLS like a real API server and writes the CA into its
// kubeconfig) and by tests that need a TLS console. Production consoles load certificates
// from files instead (LoadTlsServerConfig).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace uplink::net {

struct CertificateAuthority {
  std::string cert_pem;
  std::string key_pem;
};

struct IssuedCertificate {
  std::string cert_pem;  // leaf only
  std::string key_pem;
};

Result<CertificateAuthority> CreateCertificateAuthority(const std::string& common_name, int days);

// A server certificate for the given names; entries that parse as IPv4/IPv6 addresses become
// IP subjectAltNames, the rest DNS names.
Result<IssuedCertificate> IssueServerCertificate(const CertificateAuthority& ca,
                                                 const std::vector<std::string>& names, int days);

}  // namespace uplink::net
