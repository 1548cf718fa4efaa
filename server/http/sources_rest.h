// The Sources API over the HTTP door, as Google's API design guide maps it to REST (JSON bodies
// with the .proto's field names; the same rules and answers as gRPC's):
//
//   POST   /v1/sources?source_id=ID        CreateSource, the body a Source
//   GET    /v1/sources?page_size=&page_token=&filter=
//   GET    /v1/sources/ID
//   PATCH  /v1/sources/ID?update_mask=a,b  UpdateSource, the body a Source
//   DELETE /v1/sources/ID
//   GET    /v1/sources:subscribe?names=sources/A,sources/B   Subscribe, as server-sent events
//          (update_event_stream.h); no names: every source
//
// Tokens are checked here, by the call gate's rules for the gRPC methods they stand for (an
// admin token to change sources), not by the HTTP server's inference-token check.
#ifndef VIDCLF_SERVER_HTTP_SOURCES_REST_H_
#define VIDCLF_SERVER_HTTP_SOURCES_REST_H_

#include "absl/strings/string_view.h"
#include "server/http/http_server.h"
#include "server/metrics.h"
#include "server/security/call_gate.h"
#include "server/service/classify_submission.h"
#include "server/sources/source_registry.h"

namespace vidclf::http {

class SourcesRest {
 public:
  // All must outlive it.
  SourcesRest(sources::SourceRegistry* registry, const security::CallGate* gate,
              ServerMetrics* metrics)
      : registry_(registry), gate_(gate), metrics_(metrics) {}

  // Whether `path` is one of this API's (/v1/sources...).
  static bool Serves(absl::string_view path);
  // An http::Handler for the paths it Serves.
  void Handle(HttpRequest request, Responder respond) const;

 private:
  void Subscribe(const HttpRequest& request, service::Clock::time_point start,
                 Responder respond) const;

  sources::SourceRegistry* const registry_;
  const security::CallGate* const gate_;
  ServerMetrics* const metrics_;
};

}  // namespace vidclf::http

#endif  // VIDCLF_SERVER_HTTP_SOURCES_REST_H_
