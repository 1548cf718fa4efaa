// An exception that escapes a request's handling is the server's fault, never the client's, and
// must not end the process (with it every call in flight, every stream and camera). Each front
// door and worker catches it, answers with kInternalErrorMessage (HTTP 500, gRPC INTERNAL) and
// reports it here: counted for /metrics (vidclf_internal_errors_total{where}) and logged, at most
// one line a second per place, so that a flood of bad requests cannot flood the log.
#ifndef VIDCLF_SERVER_INTERNAL_ERRORS_H_
#define VIDCLF_SERVER_INTERNAL_ERRORS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace vidclf {

// What a client is told: nothing of the server's insides.
inline constexpr absl::string_view kInternalErrorMessage =
    "internal error: the server could not handle this request and logged why";

// The places that report, each counted from zero from the start.
inline constexpr absl::string_view kInternalErrorPlaces[] = {"http", "grpc", "sources", "mqtt"};

// Counts one escaped exception at `where` (one of kInternalErrorPlaces) and logs it with
// `request` (the method and path or RPC, already quoted) and `what` (its what()). Thread-safe.
void ReportInternalError(absl::string_view where, absl::string_view request,
                         absl::string_view what);

// What the exception being handled says; call inside a catch block.
std::string CurrentExceptionText();

// Runs `work`; an exception it throws is reported at `where` and answered false.
bool RunGuarded(absl::string_view where, absl::string_view request,
                const std::function<void()>& work);

// The count of each place so far, every place listed.
std::map<std::string, int64_t> InternalErrorCounts();

}  // namespace vidclf

#endif  // VIDCLF_SERVER_INTERNAL_ERRORS_H_
