#include "server/logging.h"

#include <grpc/support/log.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string_view>

#include "absl/strings/str_replace.h"
#include "common/json_text.h"
#include "media/quoted_text.h"
#include "media/uri_redaction.h"
#include "nlohmann/json.hpp"

extern "C" {
#include <libavutil/log.h>
}

namespace vidclf {
namespace {

// {"time":"2026-01-02T03:04:05.678Z","level":"info","message":"..."}: the message is escaped by
// a JSON library, so that quotes or control characters in it cannot break the line.
class JsonLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& message, spdlog::memory_buf_t& out) override {
    const auto since_epoch = message.time.time_since_epoch();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    const auto millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
    const std::time_t time = seconds.count();
    std::tm utc{};
    gmtime_r(&time, &utc);
    char stamp[40];
    std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                  utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                  static_cast<int>(millis));
    const spdlog::string_view_t level = spdlog::level::to_string_view(message.level);
    const nlohmann::ordered_json line = {
        {"time", stamp},
        {"level", std::string(level.data(), level.size())},
        {"message", std::string(message.payload.data(), message.payload.size())}};
    const std::string text = JsonText(line);
    out.append(text.data(), text.data() + text.size());
    out.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLineFormatter>();
  }
};

// Every line, whoever wrote it (FFmpeg names the URLs it opens), with the user info and query of
// any URI in it redacted, bytes that are not UTF-8 replaced and line breaks written as \n (a
// message may quote what a client sent: it must not forge lines or break a log collector), then
// formatted by `inner`.
class RedactingFormatter final : public spdlog::formatter {
 public:
  explicit RedactingFormatter(std::unique_ptr<spdlog::formatter> inner)
      : inner_(std::move(inner)) {}

  void format(const spdlog::details::log_msg& message, spdlog::memory_buf_t& out) override {
    const std::string text =
        absl::StrReplaceAll(media::ValidUtf8(media::RedactSecrets(
                                absl::string_view(message.payload.data(), message.payload.size()))),
                            {{"\n", "\\n"}, {"\r", "\\r"}});
    spdlog::details::log_msg redacted = message;
    redacted.payload = spdlog::string_view_t(text.data(), text.size());
    inner_->format(redacted, out);
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<RedactingFormatter>(inner_->clone());
  }

 private:
  std::unique_ptr<spdlog::formatter> inner_;
};

// gRPC's own log lines (a failed TLS handshake, say) join ours, in the same format. Its errors
// are about a peer or a connection, not the server, hence warnings.
void LogGrpcLine(gpr_log_func_args* line) {
  const spdlog::level::level_enum level =
      line->severity == GPR_LOG_SEVERITY_ERROR  ? spdlog::level::warn
      : line->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::info
                                                : spdlog::level::debug;
  spdlog::log(level, "grpc: {}", line->message);
}

// FFmpeg's own lines (a damaged packet, a guessed frame rate) join ours too, instead of going to
// stderr in FFmpeg's format. --media-log-level chooses which: they are logged as information, or
// as warnings for FFmpeg's errors, which are about a client's video rather than the server.
void LogFfmpegLine(void* context, int level, const char* format, va_list arguments) {
  if (level > av_log_get_level()) return;
  thread_local int print_prefix = 1;  // FFmpeg's state: whether the next piece starts a line
  char line[1024];
  av_log_format_line2(context, level, format, arguments, line, sizeof(line), &print_prefix);
  std::string_view text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  if (text.empty()) return;
  spdlog::log(level <= AV_LOG_ERROR ? spdlog::level::warn : spdlog::level::info, "ffmpeg: {}",
              text);
}

}  // namespace

void ConfigureLogging(LogFormat format, const std::string& level) {
  auto sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
  std::unique_ptr<spdlog::formatter> formatter;
  if (format == LogFormat::kJson) {
    formatter = std::make_unique<JsonLineFormatter>();
  } else {
    formatter = std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%eZ %l %v",
                                                            spdlog::pattern_time_type::utc);
  }
  sink->set_formatter(std::make_unique<RedactingFormatter>(std::move(formatter)));
  auto logger = std::make_shared<spdlog::logger>("vidclf-server", sink);
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
  gpr_set_log_function(LogGrpcLine);
  av_log_set_callback(LogFfmpegLine);
}

}  // namespace vidclf
