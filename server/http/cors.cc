#include "server/http/cors.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vidclf::http {

CorsPolicy::CorsPolicy(std::vector<std::string> origins)
    : origins_(origins.begin(), origins.end()) {}

absl::Status CorsPolicy::CheckOrigin(absl::string_view origin) {
  if (origin == "*") return absl::OkStatus();
  const size_t scheme_end = origin.find("://");
  const bool has_scheme =
      absl::StartsWith(origin, "http://") || absl::StartsWith(origin, "https://");
  if (!has_scheme || scheme_end + 3 == origin.size() ||
      origin.find('/', scheme_end + 3) != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", origin,
                     "' is not an origin: write it as browsers send it, scheme://host[:port] "
                     "with no path (https://app.example.com), or * for any"));
  }
  return absl::OkStatus();
}

bool CorsPolicy::Allows(const std::string& origin) const {
  return !origin.empty() && (origins_.count("*") != 0 || origins_.count(origin) != 0);
}

HeaderList CorsPolicy::HeadersFor(const std::string& origin) const {
  // Answers differ by origin once any is allowed: caches must keep them apart.
  if (!Allows(origin)) return origins_.empty() ? HeaderList{} : HeaderList{{"Vary", "Origin"}};
  // The binary-data extension's answers say where their JSON ends in this header.
  return {{"Access-Control-Allow-Origin", origin},
          {"Access-Control-Expose-Headers", "Inference-Header-Content-Length"},
          {"Vary", "Origin"}};
}

HeaderList CorsPolicy::PreflightHeadersFor(const std::string& origin) const {
  if (!Allows(origin)) return {};
  return {{"Access-Control-Allow-Origin", origin},
          {"Access-Control-Allow-Methods", "GET, POST"},
          {"Access-Control-Allow-Headers",
           "Authorization, Content-Type, Inference-Header-Content-Length"},
          {"Access-Control-Max-Age", "600"},
          {"Vary", "Origin"}};
}

}  // namespace vidclf::http
