#pragma once

// The HTTP side of `flopscoped --metrics HOST:PORT`: civetweb (Debian's libcivetweb, the server
// prometheus-cpp itself embeds) answering GET /metrics with the registry's exposition text.
// Anything else is refused: another path 404, another method 405. Requests are bounded by
// civetweb (headers at most kMaxRequestBytes, kRequestTimeoutMs to arrive), served by
// kServerThreads threads without keep-alive; no files are served (no document root).
// Everything exported is read-only and contains no record content beyond host names and job
// ids; the default address is loopback (`--metrics :PORT` or `--metrics PORT`).
//
// civetweb directly, not prometheus-cpp-pull's Exposer (the same civetweb underneath), to keep
// what is served as it was: the Exposer adds its own exposer_* families to every scrape,
// answers gzip to a client that accepts it, and reports a port it cannot bind by throwing, not
// as the status Start returns. The text is prometheus-cpp's either way (exposition.h).

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct mg_context;
struct mg_connection;

namespace flopscope::daemon::metrics {

inline constexpr int kMaxRequestBytes = 8192;
inline constexpr int kRequestTimeoutMs = 5000;
inline constexpr int kServerThreads = 2;
inline constexpr char kMetricsPath[] = "/metrics";

// [HOST:]PORT as typed after --metrics: "PORT" and ":PORT" mean 127.0.0.1:PORT, "localhost" is
// 127.0.0.1, any other HOST must be an IPv4 address (0.0.0.0: every interface); 0 picks a free
// port. Returns "HOST:PORT" as civetweb's listening_ports takes it, or why it is not one.
absl::StatusOr<std::string> ParseMetricsAddress(absl::string_view address);

class MetricsEndpoint {
 public:
  using Render = std::function<std::string()>;

  // Listens on `address` (ParseMetricsAddress's form) and serves `render()`'s text; `render` is
  // called on civetweb's threads, concurrently with everything else.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& address,
                                                                Render render);
  ~MetricsEndpoint();  // stops serving; returns once no request is in flight

  // "127.0.0.1:9400", the port resolved when 0 was asked.
  const std::string& address() const { return address_; }
  int port() const { return port_; }

 private:
  explicit MetricsEndpoint(Render render) : render_(std::move(render)) {}
  static int Handle(mg_connection* connection, void* self);
  int Serve(mg_connection* connection) const;

  const Render render_;
  mg_context* context_ = nullptr;
  std::string address_;
  int port_ = 0;
};

}  // namespace flopscope::daemon::metrics
