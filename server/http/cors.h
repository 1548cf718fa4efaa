// Cross-origin calls from browsers (CORS): pages served from the origins a deployment names may
// call the HTTP door with fetch. A preflight (OPTIONS with Access-Control-Request-Method) from an
// allowed origin is answered here, before any token check (browsers send no credentials with it);
// every other answer to an allowed origin says so. Other origins get no CORS headers, so the
// browser keeps the answer from their pages.
#ifndef VIDCLF_SERVER_HTTP_CORS_H_
#define VIDCLF_SERVER_HTTP_CORS_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace vidclf::http {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class CorsPolicy {
 public:
  // `origins` are "scheme://host[:port]" (as browsers send them in Origin), or "*" for any.
  explicit CorsPolicy(std::vector<std::string> origins);

  // Why `origin` cannot be allowed (a path, a missing scheme), for the flag that names it.
  static absl::Status CheckOrigin(absl::string_view origin);

  // The headers an answer to a request from `origin` (empty: not a browser's cross-origin
  // call) carries: no Access-Control-* ones when the origin is not allowed.
  HeaderList HeadersFor(const std::string& origin) const;
  // The headers of a preflight's answer (204) from an allowed `origin`.
  HeaderList PreflightHeadersFor(const std::string& origin) const;

 private:
  bool Allows(const std::string& origin) const;

  const std::set<std::string> origins_;
};

}  // namespace vidclf::http

#endif  // VIDCLF_SERVER_HTTP_CORS_H_
