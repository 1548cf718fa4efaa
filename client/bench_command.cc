#include "client/bench_command.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/classify_client.h"
#include "common/json_text.h"

namespace vidclf::client {
namespace {

// The body of a plain HTTP GET of `url` (http://host:port/path); empty on failure.
std::string HttpGet(const std::string& url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) return "";
  const size_t slash = rest.find('/');
  const std::string host_port(rest.substr(0, slash));
  const std::string path(slash == absl::string_view::npos ? "/" : rest.substr(slash));
  const size_t colon = host_port.rfind(':');
  const std::string host = host_port.substr(0, colon);
  const std::string port = colon == std::string::npos ? "80" : host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return "";
  const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  const bool connected = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0;
  freeaddrinfo(found);
  if (!connected) {
    if (fd >= 0) close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host + "\r\n\r\n";
  if (send(fd, request.data(), request.size(), 0) < 0) {
    close(fd);
    return "";
  }
  std::string response;
  char buffer[16384];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The sum of every sample of `name` on a /metrics page (labels ignored); NaN when absent.
double MetricSum(const std::string& page, const std::string& name) {
  std::istringstream lines(page);
  double sum = NAN;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    if (line[name.size()] != ' ' && line[name.size()] != '{') continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) {
      sum = std::isnan(sum) ? value : sum + value;
    }
  }
  return sum;
}

struct Level {
  int concurrency = 0;
  int requests = 0;
  int errors = 0;
  std::string first_error;
  double seconds = 0;
  double clips_per_s = 0;
  double frames_per_s = 0;
  double p50_ms = 0, p95_ms = 0, p99_ms = 0;
  std::vector<double> latencies_ms;  // of every answered call, sorted: for pooling runs
  double server_rss_bytes = NAN;
  double batch_frames_mean = NAN;
  // The server's CPU time per answered call, and the share of calls it decoded on a GPU.
  double server_cpu_seconds_per_clip = NAN;
  double gpu_decoded_share = NAN;
};

double Percentile(std::vector<double> sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = q * static_cast<double>(sorted.size() - 1);
  const size_t low = static_cast<size_t>(std::floor(rank));
  const size_t high = std::min(sorted.size() - 1, low + 1);
  return sorted[low] + (rank - static_cast<double>(low)) * (sorted[high] - sorted[low]);
}

// Runs one level: `requests` calls, at most `concurrency` at once.
Level RunLevel(const BenchOptions& options, const ClassifyClient& client,
               const std::vector<ClassifyClient::Prepared>& calls, int concurrency, int requests) {
  Level level;
  level.concurrency = concurrency;
  level.requests = requests;
  const std::string before = options.metrics_url.empty() ? "" : HttpGet(options.metrics_url);
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  std::atomic<int64_t> frames{0};
  std::mutex mutex;
  std::vector<double> latencies_ms;
  const absl::Time start = absl::Now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      for (int i; (i = next++) < requests;) {
        // Open loop: each call has its start time, and its latency counts from then.
        const absl::Time scheduled =
            options.rate > 0 ? start + absl::Seconds(i / options.rate) : absl::Now();
        absl::SleepFor(scheduled - absl::Now());
        grpc::ClientContext context;
        SetDeadline(context, options.classify.connection);
        vidclf::v1::ClassifyResponse response;
        const grpc::Status status = client.Classify(&context, calls[i % calls.size()], &response);
        const double ms = absl::ToDoubleMilliseconds(absl::Now() - scheduled);
        std::lock_guard<std::mutex> lock(mutex);
        if (status.ok()) {
          latencies_ms.push_back(ms);
          frames += response.frames_used();
        } else if (level.errors++ == 0) {
          level.first_error = status.error_message();
        }
        ++done;
      }
    });
  }
  if (!options.json && isatty(STDERR_FILENO)) {
    // A progress line on a terminal while the level runs.
    while (done < requests) {
      absl::SleepFor(absl::Milliseconds(250));
      const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
      std::cerr << absl::StrFormat("\rconcurrency %-3d %5d/%d calls  %6.2f clips/s", concurrency,
                                   done.load(), requests, done / std::max(elapsed, 1e-9))
                << std::flush;
    }
    std::cerr << "\r" << std::string(60, ' ') << "\r" << std::flush;
  }
  for (std::thread& worker : workers) worker.join();
  level.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::sort(latencies_ms.begin(), latencies_ms.end());
  level.clips_per_s = static_cast<double>(latencies_ms.size()) / level.seconds;
  level.frames_per_s = static_cast<double>(frames) / level.seconds;
  level.p50_ms = Percentile(latencies_ms, 0.50);
  level.p95_ms = Percentile(latencies_ms, 0.95);
  level.p99_ms = Percentile(latencies_ms, 0.99);
  if (!options.metrics_url.empty()) {
    const std::string after = HttpGet(options.metrics_url);
    level.server_rss_bytes = MetricSum(after, "process_resident_memory_bytes");
    const double batches = MetricSum(after, "vidclf_batch_frames_count") -
                           MetricSum(before, "vidclf_batch_frames_count");
    const double batched =
        MetricSum(after, "vidclf_batch_frames_sum") - MetricSum(before, "vidclf_batch_frames_sum");
    if (batches > 0) level.batch_frames_mean = batched / batches;
    const auto grown = [&](const std::string& name) {
      return MetricSum(after, name) - MetricSum(before, name);
    };
    if (!latencies_ms.empty()) {
      level.server_cpu_seconds_per_clip =
          grown("process_cpu_seconds_total") / static_cast<double>(latencies_ms.size());
    }
    const double decoded = grown("vidclf_decoded_clips_total");
    if (decoded > 0) {
      const double on_cpu = grown("vidclf_decoded_clips_total{device=\"cpu\"}");
      level.gpu_decoded_share = 1 - (std::isnan(on_cpu) ? 0 : on_cpu) / decoded;
    }
  }
  level.latencies_ms = std::move(latencies_ms);
  return level;
}

nlohmann::json ToJson(const Level& level) {
  auto number = [](double value) {
    return std::isnan(value) ? nlohmann::json() : nlohmann::json(value);
  };
  nlohmann::json json = {{"concurrency", level.concurrency},
                         {"requests", level.requests},
                         {"errors", level.errors},
                         {"seconds", level.seconds},
                         {"clips_per_s", level.clips_per_s},
                         {"frames_per_s", level.frames_per_s},
                         {"p50_ms", level.p50_ms},
                         {"p95_ms", level.p95_ms},
                         {"p99_ms", level.p99_ms},
                         {"latencies_ms", level.latencies_ms},
                         {"server_rss_bytes", number(level.server_rss_bytes)},
                         {"batch_frames_mean", number(level.batch_frames_mean)},
                         {"server_cpu_seconds_per_clip", number(level.server_cpu_seconds_per_clip)},
                         {"gpu_decoded_share", number(level.gpu_decoded_share)}};
  if (level.errors > 0) json["first_error"] = level.first_error;
  return json;
}

}  // namespace

int RunBench(const BenchOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(options.classify.connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  const ClassifyClient client(*channel, options.classify.protocol);
  // Each file's request made once, in the protocol's form, so that no call times its making.
  std::vector<ClassifyClient::Prepared> calls;
  for (const std::string& path : options.files) {
    vidclf::v1::ClassifyRequest request = SettingsFrom(options.classify);
    if (!ReadVideo(path, request.mutable_video())) return 1;
    calls.push_back(client.Prepare(std::move(request)));
  }
  // Connected before the first call is timed, so that it does not count the connection's set-up.
  (*channel)->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  for (int i = 0; i < options.warmup; ++i) {
    grpc::ClientContext context;
    SetDeadline(context, options.classify.connection);
    vidclf::v1::ClassifyResponse response;
    const grpc::Status status = client.Classify(&context, calls[i % calls.size()], &response);
    if (!status.ok()) {
      std::cerr << "vidclf bench: a warm-up call failed: " << status.error_message() << "\n";
      return 1;
    }
  }
  nlohmann::json levels = nlohmann::json::array();
  if (!options.json) {
    std::cout << absl::StrFormat("%-11s  %8s  %6s  %8s  %9s  %8s  %8s  %8s  %6s  %10s\n",
                                 "concurrency", "calls", "errors", "clips/s", "frames/s", "p50 ms",
                                 "p95 ms", "p99 ms", "batch", "server RSS")
              << std::flush;
  }
  int failed_levels = 0;
  for (const int concurrency : options.concurrency) {
    const int requests = options.requests > 0 ? options.requests : std::max(16, 8 * concurrency);
    const Level level = RunLevel(options, client, calls, concurrency, requests);
    if (level.errors == level.requests) ++failed_levels;
    if (options.json) {
      levels.push_back(ToJson(level));
      continue;
    }
    std::cout << absl::StrFormat("%-11d  %8d  %6d  %8.2f  %9.1f  %8.1f  %8.1f  %8.1f  %6s  %10s\n",
                                 level.concurrency, level.requests, level.errors, level.clips_per_s,
                                 level.frames_per_s, level.p50_ms, level.p95_ms, level.p99_ms,
                                 std::isnan(level.batch_frames_mean)
                                     ? "-"
                                     : absl::StrFormat("%.1f", level.batch_frames_mean),
                                 std::isnan(level.server_rss_bytes)
                                     ? "-"
                                     : absl::StrFormat("%.0f MB", level.server_rss_bytes / 1e6))
              << std::flush;
    if (level.errors > 0) std::cerr << "first error: " << level.first_error << "\n";
  }
  if (options.json) std::cout << JsonText(nlohmann::json{{"levels", levels}}, 2) << "\n";
  return failed_levels > 0 ? 1 : 0;
}

}  // namespace vidclf::client
