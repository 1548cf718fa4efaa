// The page for people on the HTTP port (server/http/page/, compiled into the server): a person
// drops a video and sees its labels, scores, the frames used and the stage timings, and the
// models with their metadata. It calls the REST endpoints of inference_rest.h and nothing else,
// so it needs no access of its own: its files are open to all, its calls take the token the
// person types. --no-http-page leaves it out.
#ifndef VIDCLF_SERVER_HTTP_WEB_PAGE_H_
#define VIDCLF_SERVER_HTTP_WEB_PAGE_H_

#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/http/http_server.h"

namespace vidclf::http {

struct PageFile {
  const char* name;  // its file name in server/http/page/
  absl::string_view body;
};

// The page's files (made at build time by page/embed_page.cmake).
const std::vector<PageFile>& PageFiles();

// Whether `path` is one of the page's files.
bool IsPageFile(absl::string_view path);

// The page's answer to a GET of `path` ("/" is index.html), or nothing when `path` is not one
// of its files.
std::optional<HttpResponse> ServePage(absl::string_view path);

}  // namespace vidclf::http

#endif  // VIDCLF_SERVER_HTTP_WEB_PAGE_H_
