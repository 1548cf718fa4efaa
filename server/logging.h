// The server's log: one line per event, as text for people or JSON for log collectors, through
// spdlog's default logger, all on stdout: one stream, in the order events happened, which is what
// container runtimes and log collectors read. gRPC's and FFmpeg's own log lines go the same way.
#ifndef VIDCLF_SERVER_LOGGING_H_
#define VIDCLF_SERVER_LOGGING_H_

#include <spdlog/spdlog.h>

#include <string>

namespace vidclf {

enum class LogFormat { kText, kJson };

// Makes spdlog's default logger write `format` at `level` and above ("trace", "debug", "info",
// "warn", "error", "off"). Call once, before threads log.
void ConfigureLogging(LogFormat format, const std::string& level);

}  // namespace vidclf

#endif  // VIDCLF_SERVER_LOGGING_H_
