#pragma once

// gRPC credentials from checked mutual-TLS files (tls_files.h): the one place client and server
// sides are built, so every TCP link of flopscope uses the same settings.

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <optional>

#include "common/tls/tls_files.h"

namespace flopscope::tls {

// A client's: mutual TLS with `tls` (its certificate, key and the CA that signed the server's);
// nullopt: no channel security (a unix socket).
std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const std::optional<TlsPem>& tls);

// A server's: it presents tls.cert and accepts only clients whose certificate tls.ca signed.
std::shared_ptr<grpc::ServerCredentials> MutualTlsServerCredentials(const TlsPem& tls);

}  // namespace flopscope::tls
