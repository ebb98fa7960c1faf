#pragma once

// The PEM files of mutual TLS (`--tls-cert`, `--tls-key`, `--tls-ca` of flopscoped and of the
// client): read, bounded and checked before gRPC sees them, so a wrong file fails at start with
// an error naming the flag and the fix instead of as a failed handshake later. Also reads the
// subject of a certificate (what the daemon's identity mapping decides from).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flopscope::tls {

// A PEM file larger than this is refused (a certificate chain is a few KiB).
inline constexpr size_t kMaxPemBytes = 1 << 20;

// Paths as the flags (or FLOPSCOPE_TLS_* variables) gave them; empty: not given.
struct TlsFilePaths {
  std::string cert;  // this side's certificate (chain), PEM
  std::string key;   // its private key, PEM
  std::string ca;    // the CA whose signature the other side's certificate must carry, PEM
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// The files' contents, checked: each parses, and the key belongs to the certificate.
struct TlsPem {
  std::string cert;
  std::string key;
  std::string ca;
};

// Reads all three (all are needed: mutual TLS); errors name the flag and the file.
absl::StatusOr<TlsPem> LoadTlsFiles(const TlsFilePaths& paths);

// What a certificate's subject says, as the daemon's identity mapping reads it.
struct CertificateSubject {
  std::string common_name;                        // the CN, UTF-8
  std::vector<std::string> organizational_units;  // every OU, UTF-8
  std::string one_line;  // the whole subject as RFC 2253 prints it ("CN=alice,O=lab"), for logs
};

// The subject of the first certificate in `pem`. A subject with more than one CN is ambiguous
// (which one is the user?) and is refused: INVALID_ARGUMENT naming the CNs.
absl::StatusOr<CertificateSubject> SubjectOfPem(absl::string_view pem);

}  // namespace flopscope::tls
