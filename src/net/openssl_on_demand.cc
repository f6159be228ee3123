// OpenSSL loaded at the first TLS use instead of at process start (see tls_library.h for why).
//
// Each OpenSSL function the binary calls is defined here under its own name, with the
// signature of the OpenSSL headers (the compiler rejects any mismatch), and forwards to the
// real function found with dlvsym in libssl.so.3 and its dependency libcrypto.so.3. The
// binary does not link OpenSSL, so the linker names any function missing from this list as an
// undefined reference: add it below, in the library that defines it.
//
// The definitions are not exported (an executable exports only what a linked library needs,
// and the agent links with --exclude-libs for this archive), so libssl's own calls into
// libcrypto bind to libcrypto, never back to these.
#include <dlfcn.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "net/tls_library.h"

namespace uplink::net {
namespace {

// libssl brings libcrypto as its DT_NEEDED dependency; dlvsym on libssl's handle searches both.
constexpr char kLibssl[] = "libssl.so.3";
// The version node every function below has carried since OpenSSL 3.0.
constexpr char kSymbolVersion[] = "OPENSSL_3.0.0";

struct Library {
  void* handle = nullptr;
  std::string error;  // why handle is null
};

std::atomic<bool> g_loaded{false};

const Library& Load() {
  static const Library library = [] {
    Library result;
    // RTLD_LOCAL keeps OpenSSL's symbols out of the global scope, where a library loaded later
    // (NVML) could bind to them.
    result.handle = ::dlopen(kLibssl, RTLD_NOW | RTLD_LOCAL);
    if (result.handle == nullptr) {
      const char* error = ::dlerror();
      result.error = error != nullptr ? error : "dlopen failed";
    } else if (::dlvsym(result.handle, "SSL_CTX_new", kSymbolVersion) == nullptr) {
      // A build without OpenSSL's symbol versions: refused here, not aborted on in a call.
      result.error = std::string(kLibssl) + " has no " + kSymbolVersion + " symbols";
      ::dlclose(result.handle);
      result.handle = nullptr;
    } else {
      g_loaded.store(true, std::memory_order_release);
    }
    return result;
  }();
  return library;
}

// Reached only when a caller skipped LoadTlsLibrary or the library lacks a 3.0 function:
// OpenSSL's callers cannot take an error from here, and a wrong guess would be worse.
[[noreturn]] void Fatal(const char* function, const std::string& why) {
  std::fprintf(stderr, "fatal: OpenSSL function %s is unavailable: %s\n", function, why.c_str());
  std::abort();
}

void* Resolve(const char* function) {
  const Library& library = Load();
  if (library.handle == nullptr) Fatal(function, library.error);
  void* symbol = ::dlvsym(library.handle, function, kSymbolVersion);
  if (symbol == nullptr) Fatal(function, std::string(kLibssl) + " has no " + kSymbolVersion);
  return symbol;
}

}  // namespace

Status LoadTlsLibrary() {
  const Library& library = Load();
  if (library.handle == nullptr) {
    return UnavailableError(std::string("TLS needs OpenSSL 3 (") + kLibssl +
                            "), which could not be loaded: " + library.error);
  }
  return Status::Ok();
}

bool TlsLibraryLoaded() { return g_loaded.load(std::memory_order_acquire); }

}  // namespace uplink::net

// Resolved once, on the function's first call; the function-local static makes that
// thread-safe.
#define UPLINK_OPENSSL_FORWARD(result, function, parameters, arguments)                    \
  extern "C" result function parameters {                                                  \
    static const auto real =                                                               \
        reinterpret_cast<decltype(&::function)>(uplink::net::Resolve(#function));          \
    return real arguments;                                                                 \
  }

// libcrypto
UPLINK_OPENSSL_FORWARD(long, BIO_ctrl, (BIO * b, int cmd, long larg, void* parg),
                       (b, cmd, larg, parg))
UPLINK_OPENSSL_FORWARD(size_t, BIO_ctrl_pending, (BIO * b), (b))
UPLINK_OPENSSL_FORWARD(int, BIO_free, (BIO * b), (b))
UPLINK_OPENSSL_FORWARD(int, BIO_new_bio_pair,
                       (BIO * *bio1, size_t writebuf1, BIO** bio2, size_t writebuf2),
                       (bio1, writebuf1, bio2, writebuf2))
UPLINK_OPENSSL_FORWARD(BIO*, BIO_new_mem_buf, (const void* buf, int len), (buf, len))
UPLINK_OPENSSL_FORWARD(int, BIO_read, (BIO * b, void* data, int length), (b, data, length))
UPLINK_OPENSSL_FORWARD(int, BIO_write, (BIO * b, const void* data, int length),
                       (b, data, length))
UPLINK_OPENSSL_FORWARD(void, ERR_clear_error, (void), ())
UPLINK_OPENSSL_FORWARD(unsigned long, ERR_get_error, (void), ())
UPLINK_OPENSSL_FORWARD(const char*, ERR_lib_error_string, (unsigned long e), (e))
UPLINK_OPENSSL_FORWARD(unsigned long, ERR_peek_error, (void), ())
UPLINK_OPENSSL_FORWARD(unsigned long, ERR_peek_last_error, (void), ())
UPLINK_OPENSSL_FORWARD(const char*, ERR_reason_error_string, (unsigned long e), (e))
UPLINK_OPENSSL_FORWARD(void, EVP_PKEY_free, (EVP_PKEY * key), (key))
UPLINK_OPENSSL_FORWARD(EVP_PKEY*, PEM_read_bio_PrivateKey,
                       (BIO * in, EVP_PKEY** out, pem_password_cb* callback, void* data),
                       (in, out, callback, data))
UPLINK_OPENSSL_FORWARD(X509*, PEM_read_bio_X509,
                       (BIO * in, X509** out, pem_password_cb* callback, void* data),
                       (in, out, callback, data))
UPLINK_OPENSSL_FORWARD(X509*, PEM_read_bio_X509_AUX,
                       (BIO * in, X509** out, pem_password_cb* callback, void* data),
                       (in, out, callback, data))
UPLINK_OPENSSL_FORWARD(int, X509_STORE_add_cert, (X509_STORE * store, X509* cert),
                       (store, cert))
UPLINK_OPENSSL_FORWARD(int, X509_VERIFY_PARAM_set1_host,
                       (X509_VERIFY_PARAM * param, const char* name, size_t length),
                       (param, name, length))
UPLINK_OPENSSL_FORWARD(int, X509_VERIFY_PARAM_set1_ip_asc,
                       (X509_VERIFY_PARAM * param, const char* ip), (param, ip))
UPLINK_OPENSSL_FORWARD(void, X509_VERIFY_PARAM_set_hostflags,
                       (X509_VERIFY_PARAM * param, unsigned int flags), (param, flags))
UPLINK_OPENSSL_FORWARD(void, X509_free, (X509 * cert), (cert))
UPLINK_OPENSSL_FORWARD(const char*, X509_verify_cert_error_string, (long n), (n))

// libssl
UPLINK_OPENSSL_FORWARD(int, SSL_CTX_check_private_key, (const SSL_CTX* ctx), (ctx))
UPLINK_OPENSSL_FORWARD(long, SSL_CTX_ctrl, (SSL_CTX * ctx, int cmd, long larg, void* parg),
                       (ctx, cmd, larg, parg))
UPLINK_OPENSSL_FORWARD(void, SSL_CTX_free, (SSL_CTX * ctx), (ctx))
UPLINK_OPENSSL_FORWARD(X509_STORE*, SSL_CTX_get_cert_store, (const SSL_CTX* ctx), (ctx))
UPLINK_OPENSSL_FORWARD(pem_password_cb*, SSL_CTX_get_default_passwd_cb, (SSL_CTX * ctx), (ctx))
UPLINK_OPENSSL_FORWARD(void*, SSL_CTX_get_default_passwd_cb_userdata, (SSL_CTX * ctx), (ctx))
UPLINK_OPENSSL_FORWARD(void*, SSL_CTX_get_ex_data, (const SSL_CTX* ctx, int index),
                       (ctx, index))
UPLINK_OPENSSL_FORWARD(SSL_verify_cb, SSL_CTX_get_verify_callback, (const SSL_CTX* ctx), (ctx))
UPLINK_OPENSSL_FORWARD(int, SSL_CTX_load_verify_locations,
                       (SSL_CTX * ctx, const char* file, const char* path), (ctx, file, path))
UPLINK_OPENSSL_FORWARD(SSL_CTX*, SSL_CTX_new, (const SSL_METHOD* method), (method))
UPLINK_OPENSSL_FORWARD(void, SSL_CTX_set_default_passwd_cb_userdata, (SSL_CTX * ctx, void* data),
                       (ctx, data))
UPLINK_OPENSSL_FORWARD(int, SSL_CTX_set_default_verify_paths, (SSL_CTX * ctx), (ctx))
UPLINK_OPENSSL_FORWARD(int, SSL_CTX_set_ex_data, (SSL_CTX * ctx, int index, void* data),
                       (ctx, index, data))
UPLINK_OPENSSL_FORWARD(uint64_t, SSL_CTX_set_options, (SSL_CTX * ctx, uint64_t options),
                       (ctx, options))
UPLINK_OPENSSL_FORWARD(void, SSL_CTX_set_verify, (SSL_CTX * ctx, int mode, SSL_verify_cb callback),
                       (ctx, mode, callback))
UPLINK_OPENSSL_FORWARD(int, SSL_CTX_use_PrivateKey, (SSL_CTX * ctx, EVP_PKEY* key), (ctx, key))
UPLINK_OPENSSL_FORWARD(int, SSL_CTX_use_certificate, (SSL_CTX * ctx, X509* cert), (ctx, cert))
UPLINK_OPENSSL_FORWARD(int, SSL_accept, (SSL * ssl), (ssl))
UPLINK_OPENSSL_FORWARD(int, SSL_connect, (SSL * ssl), (ssl))
UPLINK_OPENSSL_FORWARD(long, SSL_ctrl, (SSL * ssl, int cmd, long larg, void* parg),
                       (ssl, cmd, larg, parg))
UPLINK_OPENSSL_FORWARD(void, SSL_free, (SSL * ssl), (ssl))
UPLINK_OPENSSL_FORWARD(X509_VERIFY_PARAM*, SSL_get0_param, (SSL * ssl), (ssl))
UPLINK_OPENSSL_FORWARD(int, SSL_get_error, (const SSL* ssl, int result), (ssl, result))
UPLINK_OPENSSL_FORWARD(void*, SSL_get_ex_data, (const SSL* ssl, int index), (ssl, index))
UPLINK_OPENSSL_FORWARD(int, SSL_get_shutdown, (const SSL* ssl), (ssl))
UPLINK_OPENSSL_FORWARD(long, SSL_get_verify_result, (const SSL* ssl), (ssl))
UPLINK_OPENSSL_FORWARD(SSL*, SSL_new, (SSL_CTX * ctx), (ctx))
UPLINK_OPENSSL_FORWARD(int, SSL_read, (SSL * ssl, void* buffer, int size), (ssl, buffer, size))
UPLINK_OPENSSL_FORWARD(void, SSL_set_bio, (SSL * ssl, BIO* read, BIO* write), (ssl, read, write))
UPLINK_OPENSSL_FORWARD(int, SSL_set_ex_data, (SSL * ssl, int index, void* data),
                       (ssl, index, data))
UPLINK_OPENSSL_FORWARD(int, SSL_write, (SSL * ssl, const void* buffer, int size),
                       (ssl, buffer, size))
UPLINK_OPENSSL_FORWARD(const SSL_METHOD*, TLS_client_method, (void), ())
UPLINK_OPENSSL_FORWARD(const SSL_METHOD*, TLS_method, (void), ())
UPLINK_OPENSSL_FORWARD(const SSL_METHOD*, TLS_server_method, (void), ())
