#include "net/certs.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace uplink::net {
namespace {

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using BignumPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using ExtensionPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES_free>>;

// What OpenSSL says went wrong, drained from its error queue.
Status OpenSslError(std::string_view what) {
  std::string message(what);
  unsigned long code = ERR_get_error();
  if (code != 0) {
    char text[256];
    ERR_error_string_n(code, text, sizeof(text));
    message += ": ";
    message += text;
  }
  ERR_clear_error();
  return InternalError(std::move(message));
}

Result<std::string> ToPem(int (*write)(BIO*, void*), void* object, std::string_view what) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get(), object) != 1) return OpenSslError(what);
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

Result<std::string> CertificatePem(X509* cert) {
  return ToPem([](BIO* bio, void* x) { return PEM_write_bio_X509(bio, static_cast<X509*>(x)); },
               cert, "writing a certificate as PEM");
}

Result<std::string> PrivateKeyPem(EVP_PKEY* key) {
  return ToPem(
      [](BIO* bio, void* k) {
        return PEM_write_bio_PrivateKey(bio, static_cast<EVP_PKEY*>(k), nullptr, nullptr, 0,
                                        nullptr, nullptr);
      },
      key, "writing a private key as PEM");
}

Result<KeyPtr> NewP256Key() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("generating a P-256 key");
  return key;
}

// A certificate with everything but extensions and signature: random serial, validity from a
// minute ago (tolerating clock skew between peers) for `days` days.
Result<CertPtr> NewCertificate(const std::string& common_name, EVP_PKEY* key, int days) {
  CertPtr cert(X509_new());
  if (!cert) return OpenSslError("allocating a certificate");
  BignumPtr serial(BN_new());
  // 159 random bits: positive and within the 20 octets RFC 5280 allows.
  if (!serial || BN_rand(serial.get(), 159, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()))) {
    return OpenSslError("choosing a serial number");
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());
  if (X509_set_version(cert.get(), 2) != 1 ||
      !X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60) ||
      !X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr) ||
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                 -1, 0) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return OpenSslError("filling in certificate " + common_name);
  }
  return cert;
}

// Adds extensions given in OpenSSL's configuration syntax, e.g. {NID_key_usage, "critical,..."}.
Status AddExtensions(X509* cert, X509* issuer,
                     std::initializer_list<std::pair<int, const char*>> extensions) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  for (const auto& [nid, value] : extensions) {
    ExtensionPtr extension(X509V3_EXT_conf_nid(nullptr, &context, nid, value));
    if (!extension || X509_add_ext(cert, extension.get(), -1) != 1) {
      return OpenSslError(std::string("adding certificate extension ") + OBJ_nid2sn(nid));
    }
  }
  return Status::Ok();
}

// subjectAltName built from values rather than a configuration string, so a name cannot
// smuggle in extra entries.
Status AddSubjectAltNames(X509* cert, const std::vector<std::string>& names) {
  GeneralNamesPtr general_names(sk_GENERAL_NAME_new_null());
  if (!general_names) return OpenSslError("allocating subjectAltName");
  for (const std::string& name : names) {
    GENERAL_NAME* entry = GENERAL_NAME_new();
    if (!entry) return OpenSslError("allocating subjectAltName");
    if (ASN1_OCTET_STRING* ip = a2i_IPADDRESS(name.c_str())) {
      GENERAL_NAME_set0_value(entry, GEN_IPADD, ip);
    } else {
      ERR_clear_error();  // not an address: a DNS name
      ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
      if (!dns || ASN1_STRING_set(dns, name.data(), static_cast<int>(name.size())) != 1) {
        ASN1_IA5STRING_free(dns);
        GENERAL_NAME_free(entry);
        return OpenSslError("encoding DNS name " + name);
      }
      GENERAL_NAME_set0_value(entry, GEN_DNS, dns);
    }
    if (sk_GENERAL_NAME_push(general_names.get(), entry) == 0) {
      GENERAL_NAME_free(entry);
      return OpenSslError("adding subjectAltName " + name);
    }
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, general_names.get(), 0, X509V3_ADD_DEFAULT) !=
      1) {
    return OpenSslError("adding subjectAltName");
  }
  return Status::Ok();
}

Status Sign(X509* cert, EVP_PKEY* key) {
  if (X509_sign(cert, key, EVP_sha256()) <= 0) return OpenSslError("signing a certificate");
  return Status::Ok();
}

}  // namespace

Result<CertificateAuthority> CreateCertificateAuthority(const std::string& common_name, int days) {
  if (common_name.empty()) return InvalidArgumentError("a CA needs a common name");
  if (days <= 0) return InvalidArgumentError("certificate lifetime must be at least one day");
  UPLINK_ASSIGN_OR_RETURN(KeyPtr key, NewP256Key());
  UPLINK_ASSIGN_OR_RETURN(CertPtr cert, NewCertificate(common_name, key.get(), days));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1) {
    return OpenSslError("setting the CA issuer");
  }
  // The subject key identifier must exist before the authority key identifier refers to it.
  UPLINK_RETURN_IF_ERROR(AddExtensions(cert.get(), cert.get(),
                                       {{NID_basic_constraints, "critical,CA:TRUE"},
                                        {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                        {NID_subject_key_identifier, "hash"}}));
  UPLINK_RETURN_IF_ERROR(
      AddExtensions(cert.get(), cert.get(), {{NID_authority_key_identifier, "keyid:always"}}));
  UPLINK_RETURN_IF_ERROR(Sign(cert.get(), key.get()));
  CertificateAuthority ca;
  UPLINK_ASSIGN_OR_RETURN(ca.cert_pem, CertificatePem(cert.get()));
  UPLINK_ASSIGN_OR_RETURN(ca.key_pem, PrivateKeyPem(key.get()));
  return ca;
}

Result<IssuedCertificate> IssueServerCertificate(const CertificateAuthority& ca,
                                                 const std::vector<std::string>& names, int days) {
  if (names.empty()) return InvalidArgumentError("a server certificate needs at least one name");
  for (const std::string& name : names) {
    if (name.empty()) return InvalidArgumentError("server certificate names must not be empty");
  }
  if (days <= 0) return InvalidArgumentError("certificate lifetime must be at least one day");

  BioPtr ca_cert_bio(BIO_new_mem_buf(ca.cert_pem.data(), static_cast<int>(ca.cert_pem.size())));
  CertPtr ca_cert(ca_cert_bio ? PEM_read_bio_X509(ca_cert_bio.get(), nullptr, nullptr, nullptr)
                              : nullptr);
  if (!ca_cert) return InvalidArgumentError("the CA certificate is not a PEM certificate");
  BioPtr ca_key_bio(BIO_new_mem_buf(ca.key_pem.data(), static_cast<int>(ca.key_pem.size())));
  KeyPtr ca_key(ca_key_bio ? PEM_read_bio_PrivateKey(ca_key_bio.get(), nullptr, nullptr, nullptr)
                           : nullptr);
  if (!ca_key) return InvalidArgumentError("the CA key is not a PEM private key");
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgumentError("the CA key does not match the CA certificate");
  }

  UPLINK_ASSIGN_OR_RETURN(KeyPtr key, NewP256Key());
  // A common name is limited to 64 characters; the subjectAltNames are what clients check.
  UPLINK_ASSIGN_OR_RETURN(CertPtr cert,
                          NewCertificate(names.front().substr(0, 64), key.get(), days));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get())) != 1) {
    return OpenSslError("setting the certificate issuer");
  }
  UPLINK_RETURN_IF_ERROR(
      AddExtensions(cert.get(), ca_cert.get(),
                    {{NID_basic_constraints, "critical,CA:FALSE"},
                     {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                     {NID_ext_key_usage, "serverAuth"},
                     {NID_subject_key_identifier, "hash"},
                     {NID_authority_key_identifier, "keyid:always"}}));
  UPLINK_RETURN_IF_ERROR(AddSubjectAltNames(cert.get(), names));
  UPLINK_RETURN_IF_ERROR(Sign(cert.get(), ca_key.get()));
  IssuedCertificate issued;
  UPLINK_ASSIGN_OR_RETURN(issued.cert_pem, CertificatePem(cert.get()));
  UPLINK_ASSIGN_OR_RETURN(issued.key_pem, PrivateKeyPem(key.get()));
  return issued;
}

}  // namespace uplink::net
