// Reading and checking mutual-TLS PEM files with OpenSSL (tls_files.h).
#include "common/tls/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace flopscope::tls {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

BioPtr MemoryBio(absl::string_view pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

X509Ptr FirstCertificate(absl::string_view pem) {
  BioPtr bio = MemoryBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();  // OpenSSL's queue is per thread; leave nothing for gRPC to find
  return cert;
}

KeyPtr PrivateKey(absl::string_view pem) {
  BioPtr bio = MemoryBio(pem);
  // An empty passphrase callback: an encrypted key fails here instead of prompting.
  KeyPtr key(PEM_read_bio_PrivateKey(
      bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  ERR_clear_error();
  return key;
}

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": cannot read it (", std::strerror(errno), ")"));
  }
  std::string text(kMaxPemBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPemBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": larger than ", kMaxPemBytes, " bytes; is it a PEM file?"));
  }
  return text;
}

absl::Status NotPem(absl::string_view flag, const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " ", path, ": not a PEM ", what,
                   " (expected a '-----BEGIN ...-----' block; deploy/tls/make_test_ca.sh makes "
                   "test files)"));
}

// `name` on one line, RFC 2253 style (most specific first, commas between).
std::string OneLine(const X509_NAME* name) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (bio == nullptr || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253) < 0) return "";
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return size > 0 ? std::string(data, static_cast<size_t>(size)) : std::string();
}

std::string EntryText(const X509_NAME_ENTRY* entry) {
  unsigned char* utf8 = nullptr;
  const int length =
      ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(const_cast<X509_NAME_ENTRY*>(entry)));
  if (length < 0) return "";
  std::string text(reinterpret_cast<const char*>(utf8), static_cast<size_t>(length));
  OPENSSL_free(utf8);
  return text;
}

}  // namespace

absl::StatusOr<TlsPem> LoadTlsFiles(const TlsFilePaths& paths) {
  const std::pair<const std::string*, const char*> given[] = {
      {&paths.cert, "--tls-cert"}, {&paths.key, "--tls-key"}, {&paths.ca, "--tls-ca"}};
  for (const auto& [path, flag] : given) {
    if (path->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mutual TLS needs --tls-cert, --tls-key and --tls-ca together; ", flag, " is missing"));
    }
  }
  TlsPem pem;
  std::string* targets[] = {&pem.cert, &pem.key, &pem.ca};
  for (size_t i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> text = ReadPem(*given[i].first, given[i].second);
    if (!text.ok()) return text.status();
    *targets[i] = *std::move(text);
  }
  X509Ptr cert = FirstCertificate(pem.cert);
  if (cert == nullptr) return NotPem("--tls-cert", paths.cert, "certificate");
  if (FirstCertificate(pem.ca) == nullptr) return NotPem("--tls-ca", paths.ca, "certificate");
  KeyPtr key = PrivateKey(pem.key);
  if (key == nullptr) return NotPem("--tls-key", paths.key, "private key (unencrypted)");
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat("--tls-key ", paths.key,
                                                   " is not the key of --tls-cert ", paths.cert,
                                                   "; give the key the certificate was made for"));
  }
  return pem;
}

absl::StatusOr<CertificateSubject> SubjectOfPem(absl::string_view pem) {
  X509Ptr cert = FirstCertificate(pem);
  if (cert == nullptr) return absl::InvalidArgumentError("not a PEM certificate");
  const X509_NAME* name = X509_get_subject_name(cert.get());
  CertificateSubject subject;
  std::vector<std::string> common_names;
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    const X509_NAME_ENTRY* entry = X509_NAME_get_entry(name, i);
    const int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(entry));
    if (nid == NID_commonName) common_names.push_back(EntryText(entry));
    if (nid == NID_organizationalUnitName) {
      subject.organizational_units.push_back(EntryText(entry));
    }
  }
  subject.one_line = OneLine(name);
  if (common_names.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("its subject (", subject.one_line, ") has ", common_names.size(),
                     " CNs, so it names no one user: a flopscope certificate carries one CN"));
  }
  if (!common_names.empty()) subject.common_name = std::move(common_names.front());
  return subject;
}

}  // namespace flopscope::tls
