#include "server/http/web_page.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace vidclf::http {
namespace {

std::string ContentType(absl::string_view name) {
  if (absl::EndsWith(name, ".html")) return "text/html; charset=utf-8";
  if (absl::EndsWith(name, ".js")) return "text/javascript; charset=utf-8";
  if (absl::EndsWith(name, ".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

const PageFile* FileAt(absl::string_view path) {
  const absl::string_view name = path == "/" ? "index.html" : absl::StripPrefix(path, "/");
  for (const PageFile& file : PageFiles()) {
    if (name == file.name) return &file;
  }
  return nullptr;
}

}  // namespace

bool IsPageFile(absl::string_view path) { return FileAt(path) != nullptr; }

std::optional<HttpResponse> ServePage(absl::string_view path) {
  const PageFile* file = FileAt(path);
  if (file == nullptr) return std::nullopt;
  // Scripts and styles from the page's own files only; videos the person picks are shown from
  // blob: addresses; no other site may frame it.
  return HttpResponse{200,
                      ContentType(file->name),
                      std::string(file->body),
                      {{"Content-Security-Policy",
                        "default-src 'self'; img-src 'self' blob: data:; media-src blob:; "
                        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"},
                       {"X-Content-Type-Options", "nosniff"},
                       {"Referrer-Policy", "no-referrer"},
                       {"Cache-Control", "no-cache"}}};
}

}  // namespace vidclf::http
