#include "server/http/sources_rest.h"

#include <set>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/proto_json.h"
#include "media/quoted_text.h"
#include "server/http/update_event_stream.h"
#include "server/service/classify_submission.h"
#include "server/service/finished_call.h"

namespace vidclf::http {
namespace {

constexpr char kCollection[] = "/v1/sources";
constexpr char kSubscribe[] = "/v1/sources:subscribe";

// A query argument, empty when absent.
std::string Query(const HttpRequest& request, const std::string& key) {
  const auto found = request.query.find(key);
  return found == request.query.end() ? "" : found->second;
}

}  // namespace

bool SourcesRest::Serves(absl::string_view path) {
  return path == kCollection || path == kSubscribe ||
         absl::StartsWith(path, absl::StrCat(kCollection, "/"));
}

void SourcesRest::Handle(HttpRequest request, Responder respond) const {
  const service::Clock::time_point start = service::Clock::now();
  absl::string_view id = request.path;
  absl::ConsumePrefix(&id, kCollection);
  const bool collection = id.empty();
  absl::ConsumePrefix(&id, "/");
  const std::string name = absl::StrCat("sources/", id);
  const std::string& method = request.method;

  const bool subscribe = request.path == kSubscribe;
  std::string rpc;
  if (subscribe && method == "GET") rpc = "Subscribe";
  if (collection && method == "POST") rpc = "CreateSource";
  if (collection && method == "GET") rpc = "ListSources";
  if (!collection && !subscribe && method == "GET") rpc = "GetSource";
  if (!collection && !subscribe && method == "PATCH") rpc = "UpdateSource";
  if (!collection && !subscribe && method == "DELETE") rpc = "DeleteSource";
  if (rpc.empty()) {
    return respond(JsonError(405, absl::StrCat(media::QuoteInput(method), " is not a method of ",
                                               media::QuoteInput(request.path, 128))));
  }
  const auto header = request.headers.find("authorization");
  absl::Status status = gate_->Check(absl::StrCat("/vidclf.v1.Sources/", rpc),
                                     header == request.headers.end() ? "" : header->second);
  std::string body;
  if (status.ok() && rpc == "Subscribe") return Subscribe(request, start, std::move(respond));
  if (status.ok()) {
    if (rpc == "CreateSource") {
      vidclf::v1::CreateSourceRequest create;
      create.set_source_id(Query(request, "source_id"));
      status = ProtoFromJson(request.body, create.mutable_source());
      if (status.ok()) {
        absl::StatusOr<vidclf::v1::Source> created = registry_->CreateSource(create);
        status = created.status();
        if (created.ok()) body = ProtoJson(*created);
      }
    } else if (rpc == "ListSources") {
      vidclf::v1::ListSourcesRequest list;
      int page_size = 0;
      if (const std::string size = Query(request, "page_size");
          !size.empty() && !absl::SimpleAtoi(size, &page_size)) {
        status = absl::InvalidArgumentError("page_size must be a number");
      }
      list.set_page_size(page_size);
      list.set_page_token(Query(request, "page_token"));
      list.set_filter(Query(request, "filter"));
      if (status.ok()) {
        absl::StatusOr<vidclf::v1::ListSourcesResponse> listed = registry_->ListSources(list);
        status = listed.status();
        if (listed.ok()) body = ProtoJson(*listed);
      }
    } else if (rpc == "GetSource") {
      absl::StatusOr<vidclf::v1::Source> source = registry_->GetSource(name);
      status = source.status();
      if (source.ok()) body = ProtoJson(*source);
    } else if (rpc == "UpdateSource") {
      vidclf::v1::UpdateSourceRequest update;
      status = ProtoFromJson(request.body, update.mutable_source());
      update.mutable_source()->set_name(name);
      for (absl::string_view path :
           absl::StrSplit(Query(request, "update_mask"), ',', absl::SkipEmpty())) {
        update.mutable_update_mask()->add_paths(std::string(path));
      }
      if (status.ok()) {
        absl::StatusOr<vidclf::v1::Source> updated = registry_->UpdateSource(update);
        status = updated.status();
        if (updated.ok()) body = ProtoJson(*updated);
      }
    } else {
      status = registry_->DeleteSource(name);
      body = "{}";
    }
  }
  service::RecordFinishedCall(*metrics_, absl::StrCat("Http", rpc), "unknown", status,
                              service::SecondsSince(start), request.peer);
  if (!status.ok()) return respond(JsonError(HttpCodeOf(status.code()), status.message()));
  respond(HttpResponse{200, "application/json", std::move(body), {}});
}

void SourcesRest::Subscribe(const HttpRequest& request, service::Clock::time_point start,
                            Responder respond) const {
  std::set<std::string> names;
  for (absl::string_view name : absl::StrSplit(Query(request, "names"), ',', absl::SkipEmpty())) {
    names.insert(std::string(name));
  }
  const absl::Status status = registry_->CheckRegistered({names.begin(), names.end()});
  // The call's line is written when it opens: it ends when the client goes.
  service::RecordFinishedCall(*metrics_, "HttpSubscribe", "unknown", status,
                              service::SecondsSince(start), request.peer);
  if (!status.ok()) return respond(JsonError(HttpCodeOf(status.code()), status.message()));
  HttpResponse answer{200, "text/event-stream", "", {{"Cache-Control", "no-cache"}}};
  answer.stream = UpdateEventStream::Start(&registry_->fanout(), metrics_, std::move(names));
  respond(std::move(answer));
}

}  // namespace vidclf::http
