// gRPC credentials for flopscope's mutual TLS (grpc_credentials.h).
#include "common/tls/grpc_credentials.h"

namespace flopscope::tls {

std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const std::optional<TlsPem>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  return grpc::SslCredentials(grpc::SslCredentialsOptions{tls->ca, tls->key, tls->cert});
}

std::shared_ptr<grpc::ServerCredentials> MutualTlsServerCredentials(const TlsPem& tls) {
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls.ca;
  options.pem_key_cert_pairs.push_back({tls.key, tls.cert});
  return grpc::SslServerCredentials(options);
}

}  // namespace flopscope::tls
