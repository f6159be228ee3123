#include "net/certs.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace uplink::net {
namespace {

struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
using CertPtr = std::unique_ptr<X509, X509Free>;

CertPtr ParsePem(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  CertPtr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return cert;
}

TEST(Certificates, CaIsACriticallyMarkedCertificateSigningAuthority) {
  auto ca = CreateCertificateAuthority("uplink test CA", 30);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  CertPtr cert = ParsePem(ca->cert_pem);
  ASSERT_TRUE(cert);
  EXPECT_EQ(X509_check_ca(cert.get()), 1);
  EXPECT_TRUE(X509_get_key_usage(cert.get()) & KU_KEY_CERT_SIGN);
  EXPECT_TRUE(X509_get_key_usage(cert.get()) & KU_CRL_SIGN);
  int critical = 0;
  auto* constraints = static_cast<BASIC_CONSTRAINTS*>(
      X509_get_ext_d2i(cert.get(), NID_basic_constraints, &critical, nullptr));
  ASSERT_NE(constraints, nullptr);
  EXPECT_TRUE(constraints->ca);
  EXPECT_EQ(critical, 1);
  BASIC_CONSTRAINTS_free(constraints);
  EXPECT_EQ(X509_get_signature_nid(cert.get()), NID_ecdsa_with_SHA256);
  EXPECT_NE(ca->key_pem.find("BEGIN PRIVATE KEY"), std::string::npos);
}

TEST(Certificates, ServerCertificateIsALeafForItsNamesSignedByTheCa) {
  auto ca = CreateCertificateAuthority("uplink test CA", 30);
  ASSERT_TRUE(ca.ok());
  auto issued = IssueServerCertificate(*ca, {"kubesim.local", "127.0.0.1", "::1"}, 30);
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  CertPtr leaf = ParsePem(issued->cert_pem);
  CertPtr authority = ParsePem(ca->cert_pem);
  ASSERT_TRUE(leaf && authority);

  EXPECT_EQ(X509_check_ca(leaf.get()), 0);
  EXPECT_TRUE(X509_get_extended_key_usage(leaf.get()) & XKU_SSL_SERVER);
  EXPECT_TRUE(X509_get_key_usage(leaf.get()) & KU_DIGITAL_SIGNATURE);
  EXPECT_EQ(X509_check_host(leaf.get(), "kubesim.local", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(leaf.get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(leaf.get(), "::1", 0), 1);
  EXPECT_NE(X509_check_host(leaf.get(), "127.0.0.1", 0, 0, nullptr), 1)
      << "an address must be an IP subjectAltName, not a DNS name";
  EXPECT_NE(X509_check_host(leaf.get(), "other.local", 0, 0, nullptr), 1);

  EVP_PKEY* ca_key = X509_get0_pubkey(authority.get());
  EXPECT_EQ(X509_verify(leaf.get(), ca_key), 1);
  EXPECT_LT(X509_cmp_current_time(X509_get0_notBefore(leaf.get())), 0)
      << "notBefore should be in the past to tolerate clock skew";
}

TEST(Certificates, SerialNumbersDiffer) {
  auto ca = CreateCertificateAuthority("uplink test CA", 1);
  ASSERT_TRUE(ca.ok());
  auto first = IssueServerCertificate(*ca, {"a"}, 1);
  auto second = IssueServerCertificate(*ca, {"a"}, 1);
  ASSERT_TRUE(first.ok() && second.ok());
  CertPtr a = ParsePem(first->cert_pem);
  CertPtr b = ParsePem(second->cert_pem);
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(a.get()), X509_get0_serialNumber(b.get())), 0);
}

TEST(Certificates, InvalidRequestsAreRefused) {
  EXPECT_EQ(CreateCertificateAuthority("", 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCertificateAuthority("ca", 0).status().code(), StatusCode::kInvalidArgument);
  auto ca = CreateCertificateAuthority("ca", 1);
  ASSERT_TRUE(ca.ok());
  EXPECT_EQ(IssueServerCertificate(*ca, {}, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(IssueServerCertificate(*ca, {""}, 1).status().code(), StatusCode::kInvalidArgument);
  CertificateAuthority broken{ca->cert_pem, "garbage"};
  EXPECT_EQ(IssueServerCertificate(broken, {"a"}, 1).status().code(), StatusCode::kInvalidArgument);
  auto other = CreateCertificateAuthority("other", 1);
  ASSERT_TRUE(other.ok());
  CertificateAuthority mismatched{ca->cert_pem, other->key_pem};
  EXPECT_EQ(IssueServerCertificate(mismatched, {"a"}, 1).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace uplink::net
