#include "daemon/metrics/metrics_endpoint.h"

#include <civetweb.h>

#include <cstring>
#include <mutex>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/logger.h"
#include "daemon/metrics/exposition.h"

namespace flopscope::daemon::metrics {
namespace {

// civetweb's own messages (a bad request, a socket error) go to the daemon's log, sanitised
// there, instead of its default stderr.
int LogCivetweb(const mg_connection*, const char* message) {
  LogDebug("metrics endpoint: ", message);
  return 1;
}

absl::string_view HostOf(absl::string_view address) {
  return address.substr(0, address.rfind(':'));
}

bool IsIpv4(absl::string_view host) {
  int parts = 0;
  for (absl::string_view rest = host; !rest.empty(); ++parts) {
    const size_t dot = rest.find('.');
    uint32_t octet = 0;
    const absl::string_view part = rest.substr(0, dot);
    if (part.empty() || part.size() > 3 || !absl::SimpleAtoi(part, &octet) || octet > 255) {
      return false;
    }
    rest = dot == absl::string_view::npos ? absl::string_view() : rest.substr(dot + 1);
  }
  return parts == 4;
}

}  // namespace

absl::StatusOr<std::string> ParseMetricsAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  const absl::string_view port_text =
      colon == absl::string_view::npos ? address : address.substr(colon + 1);
  absl::string_view host = colon == absl::string_view::npos ? "" : address.substr(0, colon);
  uint32_t port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics ", address,
                     ": expected [HOST:]PORT with a port from 0 to 65535, e.g. 9400 "
                     "or 0.0.0.0:9400"));
  }
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  // IPv4 only: Debian's civetweb refuses "[::1]:PORT" ("Failed to setup server ports").
  if (!IsIpv4(host)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics ", address,
                     ": HOST must be an IPv4 address (0.0.0.0 for every interface) or "
                     "localhost"));
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& address,
                                                                        Render render) {
  static std::once_flag library_ready;
  std::call_once(library_ready, [] { mg_init_library(0); });
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint(std::move(render)));
  const std::string threads = std::to_string(kServerThreads);
  const std::string max_request = std::to_string(kMaxRequestBytes);
  const std::string timeout = std::to_string(kRequestTimeoutMs);
  const char* options[] = {"listening_ports",
                           address.c_str(),
                           "num_threads",
                           threads.c_str(),
                           "max_request_size",
                           max_request.c_str(),
                           "request_timeout_ms",
                           timeout.c_str(),
                           "enable_keep_alive",
                           "no",
                           nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = LogCivetweb;
  mg_init_data init{&callbacks, endpoint.get(), options};
  char error_text[256] = "";
  mg_error_data error{nullptr, error_text, sizeof(error_text)};
  endpoint->context_ = mg_start2(&init, &error);
  if (endpoint->context_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ",
                     error_text[0] != '\0' ? error_text : "civetweb did not start"));
  }
  mg_set_request_handler(endpoint->context_, "/", &MetricsEndpoint::Handle, endpoint.get());
  mg_server_port ports[1];
  if (mg_get_server_ports(endpoint->context_, 1, ports) == 1) endpoint->port_ = ports[0].port;
  endpoint->address_ = absl::StrCat(HostOf(address), ":", endpoint->port_);
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (context_ != nullptr) mg_stop(context_);
}

int MetricsEndpoint::Handle(mg_connection* connection, void* self) {
  return static_cast<const MetricsEndpoint*>(self)->Serve(connection);
}

int MetricsEndpoint::Serve(mg_connection* connection) const {
  const mg_request_info* request = mg_get_request_info(connection);
  const absl::string_view path = request->local_uri != nullptr ? request->local_uri : "";
  if (path != kMetricsPath) {
    mg_send_http_error(connection, 404, "only %s is served here", kMetricsPath);
    return 404;
  }
  if (std::strcmp(request->request_method, "GET") != 0) {
    mg_send_http_error(connection, 405, "only GET %s is served here", kMetricsPath);
    return 405;
  }
  const std::string body = render_();
  mg_send_http_ok(connection, kExpositionContentType, static_cast<long long>(body.size()));
  mg_write(connection, body.data(), body.size());
  return 200;
}

}  // namespace flopscope::daemon::metrics
