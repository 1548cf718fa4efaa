#include "client/sources_command.h"

#include <google/protobuf/empty.pb.h>
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/signal_watcher.h"
#include "vidclf/v1/sources.grpc.pb.h"

namespace vidclf::client {
namespace {

using vidclf::v1::Source;
using vidclf::v1::SourceStatus;

std::string NameOf(const std::string& id) { return "sources/" + id; }

std::string StateName(const SourceStatus& status) {
  return SourceStatus::State_Name(status.state());
}

// "cam-1  LIVE  25.0 fps  1234 frames  2 reconnects  rtsp://host/cam  [last error]".
void PrintSource(const Source& source, bool json) {
  if (json) {
    std::cout << JsonLine(source) << std::endl;
    return;
  }
  const SourceStatus& status = source.status();
  std::string line =
      absl::StrFormat("%-24s %-12s %5.1f fps %8d frames %3d reconnects  %s",
                      source.name().substr(8), StateName(status), status.frames_per_second(),
                      status.frames(), status.reconnects(), source.uri());
  if (!status.last_error().empty()) absl::StrAppend(&line, "  [", status.last_error(), "]");
  std::cout << line << std::endl;
}

void PrintUpdate(const vidclf::v1::SourceUpdate& update, const FollowOptions& follow) {
  if (follow.json) {
    std::cout << JsonLine(update) << std::endl;
    return;
  }
  const std::string id = update.name().substr(8);
  if (update.has_status()) {
    std::cout << id << ": " << StateName(update.status())
              << (update.status().last_error().empty() ? ""
                                                       : " (" + update.status().last_error() + ")")
              << std::endl;
  } else if (update.has_events()) {
    vidclf::v1::StreamPrediction events;
    *events.mutable_events() = update.events().events();
    std::cout << id << ": ";
    FollowOptions only_events = follow;
    only_events.events_only = true;
    PrintPrediction(events, only_events);
  } else if (update.has_prediction()) {
    std::cout << id << ": ";
    PrintPrediction(update.prediction(), follow);
  }
}

// The Source that `add`'s options describe.
absl::StatusOr<Source> SourceFrom(const SourcesOptions& options) {
  Source source;
  source.set_uri(options.uri);
  *source.mutable_config() = StreamConfigFrom(options.follow);
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> input =
      ParseKeyValues(options.input_options, "--input-option");
  if (!input.ok()) return input.status();
  source.mutable_input_options()->insert(input->begin(), input->end());
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> labels =
      ParseKeyValues(options.labels, "--label");
  if (!labels.ok()) return labels.status();
  source.mutable_labels()->insert(labels->begin(), labels->end());
  source.set_stall_timeout_seconds(options.stall_timeout_seconds);
  source.set_max_reconnects(static_cast<uint32_t>(std::max(0, options.max_reconnects)));
  source.set_paused(options.paused);
  source.set_realtime(options.realtime);
  return source;
}

class SourcesClient {
 public:
  explicit SourcesClient(std::shared_ptr<grpc::Channel> channel, const ConnectionOptions& options)
      : stub_(vidclf::v1::Sources::NewStub(std::move(channel))), options_(options) {}

  template <typename Request, typename Response, typename Method>
  grpc::Status Call(Method method, const Request& request, Response* response) {
    grpc::ClientContext context;
    if (options_.timeout_seconds > 0) SetDeadline(context, options_);
    return (stub_.get()->*method)(&context, request, response);
  }

  vidclf::v1::Sources::Stub& stub() { return *stub_; }

 private:
  std::unique_ptr<vidclf::v1::Sources::Stub> stub_;
  const ConnectionOptions& options_;
};

int Add(SourcesClient& client, const SourcesOptions& options) {
  absl::StatusOr<Source> source = SourceFrom(options);
  if (!source.ok()) return FailBeforeCalling(source.status());
  vidclf::v1::CreateSourceRequest request;
  request.set_source_id(options.id);
  *request.mutable_source() = *std::move(source);
  Source created;
  const grpc::Status status =
      client.Call(&vidclf::v1::Sources::Stub::CreateSource, request, &created);
  if (!status.ok()) return Fail(status, options.follow.connection);
  PrintSource(created, options.follow.json);
  return 0;
}

int List(SourcesClient& client, const SourcesOptions& options) {
  vidclf::v1::ListSourcesRequest request;
  request.set_filter(options.filter);
  do {
    vidclf::v1::ListSourcesResponse page;
    const grpc::Status status =
        client.Call(&vidclf::v1::Sources::Stub::ListSources, request, &page);
    if (!status.ok()) return Fail(status, options.follow.connection);
    for (const Source& source : page.sources()) PrintSource(source, options.follow.json);
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return 0;
}

int Get(SourcesClient& client, const SourcesOptions& options) {
  vidclf::v1::GetSourceRequest request;
  request.set_name(NameOf(options.id));
  Source source;
  const grpc::Status status = client.Call(&vidclf::v1::Sources::Stub::GetSource, request, &source);
  if (!status.ok()) return Fail(status, options.follow.connection);
  PrintSource(source, options.follow.json);
  return 0;
}

// Changes the fields whose options were given, keeping the rest as the server has them.
int Update(SourcesClient& client, const CLI::App& command, const SourcesOptions& options) {
  absl::StatusOr<Source> given = SourceFrom(options);
  if (!given.ok()) return FailBeforeCalling(given.status());
  vidclf::v1::UpdateSourceRequest request;
  *request.mutable_source() = *std::move(given);
  request.mutable_source()->set_name(NameOf(options.id));
  request.mutable_source()->set_paused(options.pause);
  const auto given_any = [&](std::initializer_list<const char*> flags) {
    for (const char* flag : flags) {
      if (command.count(flag) > 0) return true;
    }
    return false;
  };
  auto& paths = *request.mutable_update_mask()->mutable_paths();
  if (given_any({"--uri"})) paths.Add("uri");
  if (given_any({"--model", "--attention", "--top-k", "--emit-every-frames", "--emit-every-seconds",
                 "--embed-stride", "--segment-events", "--segment-threshold",
                 "--segment-hysteresis", "--segment-min-seconds", "--segment-max-gap-seconds",
                 "--events-only"})) {
    paths.Add("config");
  }
  if (given_any({"--input-option"})) paths.Add("input_options");
  if (given_any({"--label"})) paths.Add("labels");
  if (given_any({"--stall-timeout-seconds"})) paths.Add("stall_timeout_seconds");
  if (given_any({"--max-reconnects"})) paths.Add("max_reconnects");
  if (options.pause || options.resume) paths.Add("paused");
  if (paths.empty()) {
    return FailBeforeCalling(absl::InvalidArgumentError(
        "give what to change: --uri, the model's options, --input-option, --label, "
        "--stall-timeout-seconds, --max-reconnects, --pause or --resume"));
  }
  Source updated;
  const grpc::Status status =
      client.Call(&vidclf::v1::Sources::Stub::UpdateSource, request, &updated);
  if (!status.ok()) return Fail(status, options.follow.connection);
  PrintSource(updated, options.follow.json);
  return 0;
}

int Delete(SourcesClient& client, const SourcesOptions& options) {
  vidclf::v1::DeleteSourceRequest request;
  request.set_name(NameOf(options.id));
  google::protobuf::Empty empty;
  const grpc::Status status =
      client.Call(&vidclf::v1::Sources::Stub::DeleteSource, request, &empty);
  if (!status.ok()) return Fail(status, options.follow.connection);
  return 0;
}

// Says on stderr which of the followed sources are not LIVE, and why: a subscriber to one that
// cannot connect would otherwise wait without a word, since updates come only when something
// changes. What cannot be read here is left to Subscribe's own answer (NOT_FOUND, say).
void SayWhatIsNotLive(SourcesClient& client, const SourcesOptions& options) {
  std::vector<Source> sources;
  if (options.ids.empty()) {
    vidclf::v1::ListSourcesRequest request;
    request.set_page_size(1000);
    vidclf::v1::ListSourcesResponse page;
    if (client.Call(&vidclf::v1::Sources::Stub::ListSources, request, &page).ok()) {
      sources.assign(page.sources().begin(), page.sources().end());
    }
  }
  for (const std::string& id : options.ids) {
    vidclf::v1::GetSourceRequest request;
    request.set_name(NameOf(id));
    Source source;
    if (client.Call(&vidclf::v1::Sources::Stub::GetSource, request, &source).ok()) {
      sources.push_back(std::move(source));
    }
  }
  for (const Source& source : sources) {
    const SourceStatus& status = source.status();
    if (status.state() == SourceStatus::LIVE) continue;
    std::cerr << source.name().substr(8) << " is " << StateName(status)
              << (status.last_error().empty() ? "" : " (" + status.last_error() + ")")
              << ": its predictions come once it is LIVE; its state changes are printed as they "
                 "come"
              << std::endl;
  }
}

int Subscribe(SourcesClient& client, const SourcesOptions& options) {
  grpc::ClientContext context;
  // --timeout-seconds bounds the wait: for --count updates, or for any.
  if (options.follow.connection.timeout_seconds > 0) {
    SetDeadline(context, options.follow.connection);
  }
  SignalWatcher signals([&] { context.TryCancel(); });
  vidclf::v1::SubscribeRequest request;
  for (const std::string& id : options.ids) request.add_names(NameOf(id));
  std::unique_ptr<grpc::ClientReader<vidclf::v1::SourceUpdate>> reader =
      client.stub().Subscribe(&context, request);
  // After subscribing, so that a change between the two is heard.
  SayWhatIsNotLive(client, options);
  vidclf::v1::SourceUpdate update;
  int heard = 0;
  while (reader->Read(&update)) {
    PrintUpdate(update, options.follow);
    // --count: as `mosquitto_sub -C`, for scripts that want a few updates and an exit status.
    if (++heard == options.count) {
      context.TryCancel();
      break;
    }
  }
  const grpc::Status status = reader->Finish();
  if (signals.signalled()) return kInterruptedExit;
  if (options.count > 0 && heard == options.count) return 0;  // cancelled by us
  if (!status.ok()) return Fail(status, options.follow.connection);
  return 0;
}

}  // namespace

CLI::App* AddSourcesCommand(CLI::App& app, SourcesOptions* options) {
  CLI::App* sources = app.add_subcommand(
      "sources",
      "The cameras and streams the server pulls on its own, followed until deleted, across "
      "restarts when it has a --state-dir.");
  sources->require_subcommand(1);
  const auto add_id = [&](CLI::App* command) {
    command->add_option("id", options->id, "The source's id: a-z, 0-9 and '-'.")->required();
  };
  const auto add_fields = [&](CLI::App* command) {
    command->add_option("--input-option", options->input_options,
                        "KEY=VALUE for the server to open the source with: rtsp_transport=tcp, "
                        "rtsp_flags=prefer_tcp. Repeatable.");
    command->add_option("--label", options->labels,
                        "KEY=VALUE to group and filter sources by. Repeatable.");
    command->add_option("--stall-timeout-seconds", options->stall_timeout_seconds,
                        "Connected but no frame for this long: STALLED (default 5).");
    command->add_option("--max-reconnects", options->max_reconnects,
                        "Failed attempts in a row before FAILED (default 0: no limit).");
  };

  CLI::App* add = sources->add_subcommand("add", "Register a source and start following it.");
  add_id(add);
  add->add_option("uri", options->uri, "rtsp://, http://, file://, ... (--allow-uri).")->required();
  AddFollowOptions(add, &options->follow);
  add_fields(add);
  add->add_flag("--paused", options->paused, "Register it without pulling it yet.");
  add->add_flag("--realtime", options->realtime,
                "Hand on frames no faster than their media times pass: a recorded file played "
                "as a camera.");

  CLI::App* list = sources->add_subcommand("list", "List the sources, their state and health.");
  AddConnectionOptions(list, &options->follow.connection);
  list->add_flag("--json", options->follow.json, "One JSON object per source and line.");
  list->add_option("--filter", options->filter,
                   "\"state=LIVE\", \"labels.KEY=VALUE\", joined by \" AND \".");

  CLI::App* get = sources->add_subcommand("get", "Describe one source.");
  add_id(get);
  AddConnectionOptions(get, &options->follow.connection);
  get->add_flag("--json", options->follow.json, "Print JSON.");

  CLI::App* update = sources->add_subcommand(
      "update",
      "Change the fields given (the model's options replace the source's config as a whole); "
      "the source is followed again from a new connection.");
  add_id(update);
  update->add_option("--uri", options->uri, "A new URI.");
  AddFollowOptions(update, &options->follow);
  add_fields(update);
  CLI::Option* pause = update->add_flag("--pause", options->pause, "Stop pulling it.");
  update->add_flag("--resume", options->resume, "Pull it again.")->excludes(pause);

  CLI::App* remove = sources->add_subcommand(
      "delete", "Stop following a source (a camera is sent its TEARDOWN) and forget it.");
  add_id(remove);
  AddConnectionOptions(remove, &options->follow.connection);

  CLI::App* subscribe = sources->add_subcommand(
      "subscribe",
      "Print the predictions, segment events and state changes of sources as they "
      "come, until interrupted.");
  subscribe->add_option("ids", options->ids, "The sources to hear (default: all).");
  subscribe->add_option("--count", options->count, "Exit (0) after this many updates.")
      ->check(CLI::PositiveNumber);
  AddFollowOptions(subscribe, &options->follow);
  return sources;
}

int RunSources(const CLI::App& sources, const SourcesOptions& options) {
  ConnectionOptions connection = options.follow.connection;
  // A feed's options have no deadline; the calls that change or read sources do.
  if (!sources.got_subcommand("subscribe") && connection.timeout_seconds == 0) {
    connection.timeout_seconds = 60;
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  SourcesClient client(*channel, connection);
  if (sources.got_subcommand("add")) return Add(client, options);
  if (sources.got_subcommand("list")) return List(client, options);
  if (sources.got_subcommand("get")) return Get(client, options);
  if (sources.got_subcommand("update")) {
    return Update(client, *sources.get_subcommand("update"), options);
  }
  if (sources.got_subcommand("delete")) return Delete(client, options);
  return Subscribe(client, options);
}

}  // namespace vidclf::client
