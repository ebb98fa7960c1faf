// MetricsEndpoint over a real socket: GET /metrics answers the render, everything else is refused,
// and oversized requests are cut off by civetweb's bounds.
#include "daemon/metrics/metrics_endpoint.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "daemon/metrics/exposition.h"

namespace flopscope::daemon::metrics {
namespace {

// Sends `request` to 127.0.0.1:`port` and returns everything the server answers until it closes.
std::string Exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "connect failed";
  }
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, n);
  close(fd);
  return answer;
}

std::string StatusLine(const std::string& answer) { return answer.substr(0, answer.find("\r\n")); }

// One endpoint for the suite: stopping civetweb after a connection takes up to 2 s.
class MetricsEndpointTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start("127.0.0.1:0", [] {
          ++renders_;
          return std::string(kBody);
        });
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = endpoint->release();
  }
  static void TearDownTestSuite() {
    delete endpoint_;
    endpoint_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(endpoint_, nullptr);
    ASSERT_GT(endpoint_->port(), 0);
    renders_ = 0;
  }

  static constexpr char kBody[] = "# HELP x_total X.\n# TYPE x_total counter\nx_total 3\n";
  static inline std::atomic<int> renders_{0};
  static inline MetricsEndpoint* endpoint_ = nullptr;
};

TEST_F(MetricsEndpointTest, GetMetricsAnswersTheRenderedText) {
  EXPECT_EQ(endpoint_->address(), "127.0.0.1:" + std::to_string(endpoint_->port()));
  const std::string answer =
      Exchange(endpoint_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusLine(answer), "HTTP/1.1 200 OK");
  EXPECT_NE(answer.find(std::string("Content-Type: ") + kExpositionContentType), std::string::npos)
      << answer;
  EXPECT_EQ(answer.substr(answer.find("\r\n\r\n") + 4), kBody);
  EXPECT_EQ(renders_, 1);
}

TEST_F(MetricsEndpointTest, OtherPathsAreNotFoundAndOtherMethodsNotAllowed) {
  EXPECT_EQ(StatusLine(Exchange(endpoint_->port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")),
            "HTTP/1.1 404 Not Found");
  EXPECT_EQ(StatusLine(Exchange(endpoint_->port(), "GET /metrics/x HTTP/1.1\r\nHost: x\r\n\r\n")),
            "HTTP/1.1 404 Not Found");
  EXPECT_EQ(StatusLine(Exchange(endpoint_->port(),
                                "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")),
            "HTTP/1.1 405 Method Not Allowed");
  EXPECT_EQ(renders_, 0);
}

TEST_F(MetricsEndpointTest, AnOversizedRequestIsRefusedUnread) {
  const std::string huge_header = "X-Pad: " + std::string(2 * kMaxRequestBytes, 'a') + "\r\n";
  const std::string answer =
      Exchange(endpoint_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n" + huge_header + "\r\n");
  EXPECT_EQ(answer.find("200 OK"), std::string::npos) << StatusLine(answer);
  EXPECT_EQ(renders_, 0);
}

TEST(MetricsEndpointStartTest, ABusyPortIsAClearError) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> first =
      MetricsEndpoint::Start("127.0.0.1:0", [] { return std::string(); });
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> second =
      MetricsEndpoint::Start((*first)->address(), [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("cannot serve metrics on " + (*first)->address()),
            std::string::npos)
      << second.status();
}

TEST(ParseMetricsAddressTest, LoopbackByDefaultAndOnlyAddressesAsHosts) {
  EXPECT_EQ(*ParseMetricsAddress("9400"), "127.0.0.1:9400");
  EXPECT_EQ(*ParseMetricsAddress(":9400"), "127.0.0.1:9400");
  EXPECT_EQ(*ParseMetricsAddress("localhost:0"), "127.0.0.1:0");
  EXPECT_EQ(*ParseMetricsAddress("0.0.0.0:9400"), "0.0.0.0:9400");
  EXPECT_FALSE(ParseMetricsAddress("[::1]:9400").ok());  // Debian's civetweb: IPv4 only
  EXPECT_FALSE(ParseMetricsAddress("9400x").ok());
  EXPECT_FALSE(ParseMetricsAddress("70000").ok());
  EXPECT_FALSE(ParseMetricsAddress("example.com:9400").ok());
  EXPECT_FALSE(ParseMetricsAddress("1.2.3:9400").ok());
  EXPECT_FALSE(ParseMetricsAddress("1.2.3.256:9400").ok());
  EXPECT_FALSE(ParseMetricsAddress("").ok());
}

}  // namespace
}  // namespace flopscope::daemon::metrics
