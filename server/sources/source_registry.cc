#include "server/sources/source_registry.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/thread_name.h"
#include "model/heads/head_state_codec.h"
#include "server/internal_errors.h"
#include "server/sources/source_fields.h"

namespace vidclf::sources {
namespace {

constexpr int kDefaultPageSize = 50;
constexpr int kMaxPageSize = 1000;

// The fields UpdateSource may change.
const std::set<std::string>& UpdatableFields() {
  static const auto* const kFields = new std::set<std::string>{"uri",
                                                               "config",
                                                               "input_options",
                                                               "labels",
                                                               "stall_timeout_seconds",
                                                               "max_reconnects",
                                                               "checkpoint_interval_seconds",
                                                               "max_resume_gap_seconds",
                                                               "paused"};
  return *kFields;
}

// Copies the field named `path` from `from` into `to`.
void CopyField(const std::string& path, const vidclf::v1::Source& from, vidclf::v1::Source* to) {
  if (path == "uri") to->set_uri(from.uri());
  if (path == "config") *to->mutable_config() = from.config();
  if (path == "input_options") *to->mutable_input_options() = from.input_options();
  if (path == "labels") *to->mutable_labels() = from.labels();
  if (path == "stall_timeout_seconds") to->set_stall_timeout_seconds(from.stall_timeout_seconds());
  if (path == "max_reconnects") to->set_max_reconnects(from.max_reconnects());
  if (path == "checkpoint_interval_seconds") {
    to->set_checkpoint_interval_seconds(from.checkpoint_interval_seconds());
  }
  if (path == "max_resume_gap_seconds") {
    to->set_max_resume_gap_seconds(from.max_resume_gap_seconds());
  }
  if (path == "paused") to->set_paused(from.paused());
}

absl::Status Prefixed(absl::string_view prefix, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SourceRegistry>> SourceRegistry::Create(
    engine::ClassifyEngine* engine, std::unique_ptr<SourceStore> store, RegistryOptions options) {
  std::vector<vidclf::v1::Source> saved;
  if (store != nullptr) {
    absl::StatusOr<std::vector<vidclf::v1::Source>> loaded = store->Load();
    if (!loaded.ok()) return loaded.status();
    saved = *std::move(loaded);
  }
  std::unique_ptr<SourceRegistry> registry(
      new SourceRegistry(engine, std::move(store), std::move(options)));
  std::vector<std::shared_ptr<RegisteredSource>> started;
  for (vidclf::v1::Source& source : saved) {
    absl::StatusOr<std::string> id = IdFromName(source.name(), "a saved source's name");
    if (!id.ok()) return id.status();
    if (auto status = ValidateSourceFields(source); !status.ok()) {
      return Prefixed(absl::StrCat("the saved source ", source.name(), ": "), status);
    }
    source.clear_status();
    // One that this server cannot follow (its URI no longer allowed, its model gone) is kept and
    // says why in its status (FAILED).
    auto registered =
        std::make_shared<RegisteredSource>(std::move(source), engine, &registry->fanout_);
    if (registry->store_ != nullptr) {
      absl::StatusOr<std::optional<std::string>> checkpoint = registry->store_->LoadCheckpoint(*id);
      if (checkpoint.ok()) registered->ResumeFrom(*std::move(checkpoint));
    }
    absl::MutexLock lock(&registry->mutex_);
    registry->sources_[*id] = registered;
    started.push_back(std::move(registered));
  }
  for (const auto& source : started) source->Start();
  registry->ticker_ = std::thread([raw = registry.get()] { raw->TickLoop(); });
  return registry;
}

SourceRegistry::SourceRegistry(engine::ClassifyEngine* engine, std::unique_ptr<SourceStore> store,
                               RegistryOptions options)
    : engine_(engine), store_(std::move(store)), options_(std::move(options)) {}

SourceRegistry::~SourceRegistry() { Stop(); }

absl::Status SourceRegistry::Check(const vidclf::v1::Source& source) const {
  if (auto status = ValidateSourceFields(source); !status.ok()) return status;
  const engine::StreamOptions options = StreamOptionsOf(source);
  if (auto status = engine::ValidateStreamOptions(options); !status.ok()) {
    return Prefixed("source.config: ", status);
  }
  if (auto status = engine_->options().uri_allowlist.Check(options.uri); !status.ok()) {
    return Prefixed("source.uri: ", status);
  }
  absl::StatusOr<std::shared_ptr<const model::VideoModel>> model =
      engine_->repository()->Find(options.model);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("source.config.model: ", model.status().message()));
  }
  if (auto recurrent = (*model)->HasRecurrentStep(options.attention); !recurrent.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("source.config.attention: ", recurrent.status().message()));
  }
  return absl::OkStatus();
}

absl::Status SourceRegistry::Persist() {
  if (store_ == nullptr) return absl::OkStatus();
  std::vector<vidclf::v1::Source> registrations;
  registrations.reserve(sources_.size());
  for (const auto& [id, source] : sources_) registrations.push_back(source->spec());
  if (auto status = store_->Save(registrations); !status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the change could not be saved, so it was not made: ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<vidclf::v1::Source> SourceRegistry::CreateSource(
    const vidclf::v1::CreateSourceRequest& request) {
  if (auto status = ValidateSourceId(request.source_id()); !status.ok()) return status;
  vidclf::v1::Source spec = request.source();
  spec.clear_status();
  spec.set_name(absl::StrCat(kNamePrefix, request.source_id()));
  *spec.mutable_create_time() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
  if (auto status = Check(spec); !status.ok()) return status;
  absl::MutexLock changes(&change_mutex_);
  std::shared_ptr<RegisteredSource> source;
  {
    absl::MutexLock lock(&mutex_);
    if (stopped_) return absl::UnavailableError("the server is shutting down");
    if (sources_.count(request.source_id()) > 0) {
      return absl::AlreadyExistsError(absl::StrCat(spec.name(), " exists already"));
    }
    if (static_cast<int>(sources_.size()) >= options_.max_sources) {
      return absl::ResourceExhaustedError(absl::StrCat("this server has ", options_.max_sources,
                                                       " sources registered (--max-sources)"));
    }
    source = std::make_shared<RegisteredSource>(std::move(spec), engine_, &fanout_);
    sources_[request.source_id()] = source;
    if (auto status = Persist(); !status.ok()) {
      sources_.erase(request.source_id());
      return status;
    }
  }
  source->Start();
  return source->Snapshot();
}

absl::StatusOr<vidclf::v1::Source> SourceRegistry::GetSource(const std::string& name) const {
  absl::StatusOr<std::string> id = IdFromName(name);
  if (!id.ok()) return id.status();
  absl::MutexLock lock(&mutex_);
  const auto found = sources_.find(*id);
  if (found == sources_.end()) return absl::NotFoundError(absl::StrCat("no source ", name));
  return found->second->Snapshot();
}

absl::StatusOr<vidclf::v1::ListSourcesResponse> SourceRegistry::ListSources(
    const vidclf::v1::ListSourcesRequest& request) const {
  if (request.page_size() < 0 || request.page_size() > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be in [0, ", kMaxPageSize, "], not ", request.page_size()));
  }
  std::string after;  // the id the page starts after
  if (!request.page_token().empty()) {
    absl::StatusOr<std::string> last =
        page_tokens_.Read(request.page_token(), request.filter(), request.page_size());
    if (!last.ok()) return last.status();
    after = *std::move(last);
  }
  absl::StatusOr<SourceFilter> filter = ParseFilter(request.filter());
  if (!filter.ok()) return filter.status();
  const int page_size = request.page_size() == 0 ? kDefaultPageSize : request.page_size();
  vidclf::v1::ListSourcesResponse response;
  absl::MutexLock lock(&mutex_);
  for (auto it = sources_.upper_bound(after); it != sources_.end(); ++it) {
    vidclf::v1::Source source = it->second->Snapshot();
    if (!filter->Matches(source)) continue;
    if (response.sources_size() == page_size) {
      response.set_next_page_token(
          page_tokens_.Issue(response.sources().rbegin()->name().substr(sizeof(kNamePrefix) - 1),
                             request.filter(), request.page_size()));
      break;
    }
    *response.add_sources() = std::move(source);
  }
  return response;
}

absl::StatusOr<vidclf::v1::Source> SourceRegistry::UpdateSource(
    const vidclf::v1::UpdateSourceRequest& request) {
  absl::StatusOr<std::string> id = IdFromName(request.source().name(), "source.name");
  if (!id.ok()) return id.status();
  if (request.update_mask().paths_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update_mask must name the fields to change, of ", absl::StrJoin(UpdatableFields(), ", ")));
  }
  for (const std::string& path : request.update_mask().paths()) {
    if (UpdatableFields().count(path) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("update_mask: '", path.substr(0, 64),
                       "' cannot be changed; these can: ", absl::StrJoin(UpdatableFields(), ", ")));
    }
  }
  absl::MutexLock changes(&change_mutex_);
  std::shared_ptr<RegisteredSource> earlier;
  std::shared_ptr<RegisteredSource> replacement;
  {
    absl::MutexLock lock(&mutex_);
    if (stopped_) return absl::UnavailableError("the server is shutting down");
    const auto found = sources_.find(*id);
    if (found == sources_.end()) {
      return absl::NotFoundError(absl::StrCat("no source ", request.source().name()));
    }
    earlier = found->second;
  }
  vidclf::v1::Source spec = earlier->spec();
  for (const std::string& path : request.update_mask().paths()) {
    CopyField(path, request.source(), &spec);
  }
  if (auto status = Check(spec); !status.ok()) return status;
  // A head that cannot go on from where it was (another model or attention, another camera)
  // loses nothing by starting while the earlier one still predicts: it takes over at its first
  // frame. One that can go on waits for the earlier one's last checkpoint instead.
  const bool take_over = !spec.paused() && earlier->Connected() && !earlier->TakingOver() &&
                         (spec.uri() != earlier->spec().uri() || !SameHead(spec, earlier->spec()));
  replacement = std::make_shared<RegisteredSource>(std::move(spec), engine_, &fanout_);
  {
    absl::MutexLock lock(&mutex_);
    sources_[*id] = replacement;
    if (auto status = Persist(); !status.ok()) {
      sources_[*id] = earlier;
      return status;
    }
  }
  if (take_over) {
    replacement->InheritCounters(*earlier);
    replacement->TakeOverFrom(earlier);
    replacement->Start();
    return replacement->Snapshot();
  }
  earlier->Stop(absl::CancelledError("the source was updated"), options_.stop_timeout);
  replacement->InheritCounters(*earlier);
  // The same camera goes on where its head had got to; another one starts afresh.
  if (replacement->spec().uri() == earlier->spec().uri()) {
    replacement->ResumeFrom(earlier->LatestCheckpoint());
  }
  replacement->Start();
  return replacement->Snapshot();
}

bool SourceRegistry::SameHead(const vidclf::v1::Source& a, const vidclf::v1::Source& b) const {
  const engine::StreamOptions first = StreamOptionsOf(a);
  const engine::StreamOptions second = StreamOptionsOf(b);
  const auto model_a = engine_->repository()->Find(first.model);
  const auto model_b = engine_->repository()->Find(second.model);
  if (!model_a.ok() || !model_b.ok()) return false;
  return model::HeadStateFingerprint((*model_a)->config(), first.attention) ==
         model::HeadStateFingerprint((*model_b)->config(), second.attention);
}

absl::Status SourceRegistry::DeleteSource(const std::string& name) {
  absl::StatusOr<std::string> id = IdFromName(name);
  if (!id.ok()) return id.status();
  absl::MutexLock changes(&change_mutex_);
  std::shared_ptr<RegisteredSource> source;
  {
    absl::MutexLock lock(&mutex_);
    if (stopped_) return absl::UnavailableError("the server is shutting down");
    const auto found = sources_.find(*id);
    if (found == sources_.end()) return absl::NotFoundError(absl::StrCat("no source ", name));
    source = found->second;
    sources_.erase(found);
    if (auto status = Persist(); !status.ok()) {
      sources_[*id] = source;
      return status;
    }
  }
  source->Stop(absl::CancelledError("the source was deleted"), options_.stop_timeout);
  if (store_ != nullptr) store_->DeleteCheckpoint(*id).IgnoreError();  // an orphan is harmless
  return absl::OkStatus();
}

std::vector<vidclf::v1::Source> SourceRegistry::Snapshot() const {
  std::vector<vidclf::v1::Source> sources;
  absl::MutexLock lock(&mutex_);
  sources.reserve(sources_.size());
  for (const auto& [id, source] : sources_) sources.push_back(source->Snapshot());
  return sources;
}

absl::Status SourceRegistry::CheckRegistered(const std::vector<std::string>& names) const {
  for (const std::string& name : names) {
    absl::StatusOr<std::string> id = IdFromName(name, "names");
    if (!id.ok()) return id.status();
    absl::MutexLock lock(&mutex_);
    if (sources_.count(*id) == 0) return absl::NotFoundError(absl::StrCat("no source ", name));
  }
  return absl::OkStatus();
}

void SourceRegistry::Stop() {
  {
    absl::MutexLock lock(&mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (ticker_.joinable()) ticker_.join();  // before the lock it takes to save checkpoints
  absl::MutexLock changes(&change_mutex_);
  std::vector<std::shared_ptr<RegisteredSource>> sources;
  {
    absl::MutexLock lock(&mutex_);
    for (const auto& [id, source] : sources_) sources.push_back(source);
  }
  // All at once, so that a drain does not take one close after another.
  const absl::Status reason = absl::UnavailableError("the server is shutting down");
  for (const auto& source : sources) source->BeginStop(reason);
  for (const auto& source : sources) source->WaitStopped(options_.stop_timeout);
  SaveCheckpoints();  // the ones each session gave as it stopped
}

void SourceRegistry::SaveCheckpoints() {
  if (store_ == nullptr) return;
  std::vector<std::pair<std::string, std::shared_ptr<RegisteredSource>>> sources;
  {
    absl::MutexLock lock(&mutex_);
    sources.assign(sources_.begin(), sources_.end());
  }
  for (const auto& [id, source] : sources) {
    if (std::optional<std::string> checkpoint = source->TakeUnsavedCheckpoint()) {
      // One that cannot be saved leaves the previous one: the source resumes from further back.
      store_->SaveCheckpoint(id, *checkpoint).IgnoreError();
    }
  }
}

void SourceRegistry::TickLoop() {
  NameThisThread("vidclf-sources");
  while (true) {
    std::vector<std::shared_ptr<RegisteredSource>> sources;
    {
      absl::MutexLock lock(&mutex_);
      if (mutex_.AwaitWithTimeout(absl::Condition(&stopped_), absl::Milliseconds(250))) return;
      for (const auto& [id, source] : sources_) sources.push_back(source);
    }
    // What escapes one source's tick costs that tick, not the other sources or the server.
    for (const auto& source : sources) {
      RunGuarded("sources", source->spec().name(), [&source] { source->Tick(); });
    }
    // Between changes: a source deleted meanwhile leaves no checkpoint behind.
    absl::MutexLock changes(&change_mutex_);
    RunGuarded("sources", "the checkpoints", [this] { SaveCheckpoints(); });
  }
}

}  // namespace vidclf::sources
