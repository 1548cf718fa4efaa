#include "server/engine/classify_engine.h"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/thread_name.h"
#include "model/thread_affinity.h"
#include "model/torch_threads.h"
#include "model/video_model.h"
#include "server/engine/classify_call.h"

namespace vidclf::engine {
namespace {

// Whether every model runs on the CPU, where the backbone's intra-op threads do its arithmetic. On
// a GPU they only launch kernels, and a team bound one per CPU would gain nothing there.
bool ModelsRunOnTheCpu(const ModelRepository& repository) {
  for (const auto& [name, entry] : repository.entries()) {
    if (!entry.model->device().is_cpu()) return false;
  }
  return true;
}

EngineOptions Resolved(EngineOptions options, const ModelRepository& repository) {
  if (options.cores <= 0) {
    options.cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  if (options.decode_slots <= 0) options.decode_slots = options.cores;
  if (options.arrival_slots <= 0) options.arrival_slots = 4 * options.decode_slots;
  options.batching.max_threads = options.cores;
  options.batching.cpus = options.bind_backbone_threads && ModelsRunOnTheCpu(repository)
                              ? model::DedicatedCpus(options.cores)
                              : std::vector<int>{};
  if (options.head_intra_op_threads <= 0) options.head_intra_op_threads = options.cores;
  // A GPU runs a batch of 64 frames in about the time of 16, and each batch costs the host the
  // same: its live feeds need the larger batches (docs/gpu-serving-benchmark.md, machine 10).
  if (options.batching.max_batch_frames <= 0) {
    options.batching.max_batch_frames = ModelsRunOnTheCpu(repository) ? 16 : 64;
  }
  // On the CPU, two batches side by side while feeds are open kept up with more feeds on two
  // cores (docs/streaming-benchmark.md); a GPU runs one batch at a time anyway.
  if (options.batching.batches_with_feeds <= 0) {
    options.batching.batches_with_feeds =
        ModelsRunOnTheCpu(repository) ? std::min(2, options.cores) : 1;
  }
  return options;
}

// Bytes of one preprocessed frame of `model`.
int64_t FrameBytes(const model::VideoModel& model) {
  const int64_t side = model.config().input.crop_size;
  return side * side * 3 * static_cast<int64_t>(sizeof(float));
}

}  // namespace

void CallHandle::Cancel(const absl::Status& reason) { call_->Cancel(reason); }

absl::Status CallHandle::AddBytes(int64_t bytes) { return call_->AddBytes(bytes); }

absl::StatusOr<std::unique_ptr<ClassifyEngine>> ClassifyEngine::Create(
    const EngineOptions& options, std::shared_ptr<const ModelRepository> repository,
    EngineObserver* observer) {
  if (options.cores < 0 || options.decode_slots < 0 || options.arrival_slots < 0 ||
      options.head_threads < 1 || options.head_intra_op_threads < 0 ||
      options.max_sampled_frames < 1 || options.admission.max_inflight_calls < 0 ||
      options.admission.max_inflight_bytes < 0 || options.batching.max_batch_frames < 0 ||
      options.batching.batches_with_feeds < 0 ||
      options.batching.max_queue_delay < absl::ZeroDuration() || options.max_streams < 0 ||
      options.stream_idle_timeout <= absl::ZeroDuration() ||
      options.stream_resources.max_buffered_bytes < 1 ||
      options.stream_resources.max_buffered_pictures < 1 ||
      options.stream_resources.max_frames_in_flight < 1 ||
      options.stream_resources.source_stall_timeout <= absl::ZeroDuration() ||
      options.stream_resources.max_source_reconnects < 0) {
    return absl::InvalidArgumentError(
        "engine needs cores, decode slots, in-flight limits, queue delay, max streams and "
        "source reconnects >= 0, stream idle and source stall timeouts > 0, and head threads, "
        "max sampled frames, max batch frames and stream buffers >= 1");
  }
  if (repository == nullptr) return absl::InvalidArgumentError("engine needs a model repository");
  const EngineOptions resolved = Resolved(options, *repository);
  return std::unique_ptr<ClassifyEngine>(
      new ClassifyEngine(resolved, std::move(repository), observer));
}

ClassifyEngine::ClassifyEngine(const EngineOptions& options,
                               std::shared_ptr<const ModelRepository> repository,
                               EngineObserver* observer)
    : options_(options),
      observer_(observer != nullptr ? observer : &null_observer_),
      admission_(std::make_shared<Admission>(options.admission)),
      repository_(std::move(repository)),
      head_stepper_(&head_stage_, options.head_threads, options.max_streams, observer_),
      head_stage_(options.head_threads,
                  [threads = options.head_intra_op_threads] {
                    NameThisThread("vidclf-head");
                    model::SetIntraOpThreadsOfThisThread(threads);
                  }),
      batcher_(
          options.batching,
          [this] {
            return CoreUse{calls_decoding_.load(), live_feeds_.load()};
          },
          observer_),
      decode_stage_(options.decode_slots, [] { NameThisThread("vidclf-decode"); }),
      arrival_stage_(options.arrival_slots, [] { NameThisThread("vidclf-arrival"); }),
      stream_watchdog_([this] {
        NameThisThread("vidclf-watchdog");
        WatchStreams();
      }) {}

ClassifyEngine::~ClassifyEngine() {
  StartDraining();
  CancelAll(absl::UnavailableError("the server is stopping"));
  WaitUntilIdle(absl::InfiniteFuture());
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  stream_watchdog_.join();
  SweepStreams();
}

absl::StatusOr<std::shared_ptr<Reservation>> ClassifyEngine::ReserveCall(
    std::function<void(const absl::Status&)> on_idle) {
  Refusal refusal;
  if (auto status = admission_->Admit(0, &refusal); !status.ok()) {
    observer_->Refused(refusal);
    return status;
  }
  return Watch(std::make_shared<Reservation>(
      Reservation::Kind::kCall, std::move(on_idle),
      [admission = admission_] { admission->Release(0, /*call_ended=*/true); }));
}

absl::StatusOr<std::shared_ptr<Reservation>> ClassifyEngine::ReserveStream(
    std::function<void(const absl::Status&)> on_idle) {
  {
    absl::MutexLock lock(&mutex_);
    if (auto status = RoomForAStream(/*place_held=*/false); !status.ok()) return status;
    ++reserved_streams_;
  }
  return Watch(
      std::make_shared<Reservation>(Reservation::Kind::kStream, std::move(on_idle), [this] {
        absl::MutexLock lock(&mutex_);
        --reserved_streams_;
      }));
}

std::shared_ptr<Reservation> ClassifyEngine::Watch(std::shared_ptr<Reservation> reservation) {
  absl::MutexLock lock(&mutex_);
  reservations_.push_back(reservation);
  return reservation;
}

std::unique_ptr<CallHandle> ClassifyEngine::Submit(ClassifyInput input, Callback done,
                                                   std::shared_ptr<Reservation> reservation) {
  // A call that takes over a reservation holds its place from here on, refused or not.
  const bool reserved = reservation != nullptr && reservation->HandOver();
  auto refuse = [&](absl::Status status) -> std::unique_ptr<CallHandle> {
    if (reserved) admission_->Release(0, /*call_ended=*/true);
    done(std::move(status));
    return nullptr;
  };
  if (reservation != nullptr && !reserved) {
    return refuse(absl::DeadlineExceededError("the call's reservation expired (idle timeout)"));
  }
  absl::StatusOr<std::shared_ptr<const model::VideoModel>> model = repository()->Find(input.model);
  if (!model.ok()) return refuse(model.status());
  if (input.top_k < 0) return refuse(absl::InvalidArgumentError("top_k cannot be negative"));
  if (input.sampling.num_frames > options_.max_sampled_frames) {
    return refuse(absl::InvalidArgumentError(
        absl::StrCat("sampling.num_frames is ", input.sampling.num_frames,
                     "; this server samples at most ", options_.max_sampled_frames)));
  }
  if (!input.attention.empty()) {
    // Refuse an attention the bundle does not allow before paying for decoding.
    if (auto status = (*model)->CheckAttention(input.attention); !status.ok()) {
      return refuse(status);
    }
  }
  const absl::Duration wait = EstimatedDecodeWait();
  if (input.deadline != absl::InfiniteFuture() && absl::Now() + wait >= input.deadline) {
    observer_->Refused(Refusal::kDeadline);
    return refuse(absl::DeadlineExceededError(absl::StrCat(
        "the deadline comes before the calls ahead would be decoded (about ",
        absl::FormatDuration(wait), "); retry with a later deadline or on another replica")));
  }

  int num_frames = input.sampling.num_frames;
  if (num_frames <= 0) {
    // "fps" and "all" are capped by what one call may hold, the others take the model's count.
    const bool capped = input.sampling.strategy == media::SamplingStrategy::kFps ||
                        input.sampling.strategy == media::SamplingStrategy::kAll;
    num_frames = capped ? options_.max_sampled_frames : (*model)->config().input.num_frames;
  }
  // The payload, and the frames the call may hold at once (decoded, not yet embedded).
  const int64_t bytes =
      static_cast<int64_t>(input.source.bytes().size()) + num_frames * FrameBytes(**model);
  Refusal refusal = Refusal::kBytes;
  if (auto status = reserved ? admission_->AddBytes(bytes) : admission_->Admit(bytes, &refusal);
      !status.ok()) {
    observer_->Refused(refusal);
    return refuse(status);
  }
  const bool input_arrives = input.source.arrives_while_decoding();
  auto call = std::make_shared<ClassifyCall>(this, std::move(input), *std::move(model), num_frames,
                                             admission_, bytes, std::move(done));
  {
    absl::MutexLock lock(&mutex_);
    unanswered_[call.get()] = call;
  }
  (input_arrives ? arrival_stage_ : decode_stage_).Run([call] { call->Decode(); });
  return std::make_unique<CallHandle>(std::move(call));
}

absl::StatusOr<std::shared_ptr<StreamSession>> ClassifyEngine::OpenStream(
    StreamOptions options, StreamListener* listener, std::shared_ptr<Reservation> reservation) {
  if (auto status = ValidateStreamOptions(options); !status.ok()) return status;
  if (options.input == StreamOptions::Input::kUri) {
    if (auto status = options_.uri_allowlist.Check(options.uri); !status.ok()) return status;
  }
  absl::StatusOr<std::shared_ptr<const model::VideoModel>> model =
      repository()->Find(options.model);
  if (!model.ok()) return model.status();
  absl::StatusOr<bool> recurrent = (*model)->HasRecurrentStep(options.attention);
  if (!recurrent.ok()) return recurrent.status();
  if (auto status = FitToSegmentationModel((*model)->config(), *recurrent, options); !status.ok()) {
    return status;
  }
  StreamResources resources = options_.stream_resources;
  resources.batcher = &batcher_;
  resources.head_stepper = &head_stepper_;
  resources.observer = observer_;
  resources.uri_allowlist = &options_.uri_allowlist;
  resources.nvdec = options_.decode.nvdec;
  resources.hand_over_gpu_pictures = options_.decode.hand_over_gpu_pictures;
  if (!options.own_reconnect_policy &&
      (options.max_reconnects < 0 || options.max_reconnects > resources.max_source_reconnects)) {
    options.max_reconnects = resources.max_source_reconnects;
  }
  if (options.windows.has_value()) {
    WindowOptions& windows = *options.windows;
    if (windows.window_frames == 0) windows.window_frames = (*model)->config().input.num_frames;
    if (windows.hop_frames == 0) {
      windows.hop_frames =
          windows.window_frames % 2 == 0 ? windows.window_frames / 2 : windows.window_frames;
    }
    if (auto status = ValidateStreamOptions(options); !status.ok()) return status;
  }
  // Outside the engine's lock: an expiring reservation's owner may take it.
  if (reservation != nullptr && !reservation->HandOver()) {
    return absl::DeadlineExceededError("the stream's reservation expired (idle timeout)");
  }
  auto session = std::make_shared<StreamSession>(std::move(options), *std::move(model), *recurrent,
                                                 resources, listener);
  {
    absl::MutexLock lock(&mutex_);
    if (reservation != nullptr) --reserved_streams_;  // the session counts in its place
    // Checked under the lock, so that StartDraining, which sets it before taking the lock to end
    // the streams open, never misses one.
    if (auto status = RoomForAStream(/*place_held=*/reservation != nullptr); !status.ok()) {
      return status;
    }
    streams_.push_back(session);
    ++live_feeds_;
  }
  session->Start();
  return session;
}

absl::Status ClassifyEngine::RoomForAStream(bool place_held) {
  if (admission_->draining()) {
    observer_->Refused(Refusal::kDraining);
    return absl::UnavailableError("the server is draining; connect to another replica");
  }
  if (place_held) return absl::OkStatus();
  const int open = reserved_streams_ + static_cast<int>(std::count_if(
                                           streams_.begin(), streams_.end(),
                                           [](const auto& stream) { return !stream->ended(); }));
  if (open < options_.max_streams) return absl::OkStatus();
  observer_->Refused(Refusal::kStreams);
  return absl::ResourceExhaustedError(
      absl::StrCat("this server follows ", options_.max_streams,
                   " streams already (--max-streams); retry later or on another replica"));
}

void ClassifyEngine::WatchStreams() {
  absl::MutexLock lock(&mutex_);
  // Sweeps often enough that an ended stream's thread and memory go soon after it ends, and an
  // idle one ends within a tenth of its timeout.
  const absl::Duration period =
      std::min(absl::Milliseconds(250), options_.stream_idle_timeout / 10);
  while (!mutex_.AwaitWithTimeout(absl::Condition(&stopping_), period)) {
    mutex_.Unlock();
    SweepStreams();
    mutex_.Lock();
  }
}

void ClassifyEngine::SweepStreams() {
  const StreamClock::time_point idle_cutoff =
      StreamClock::now() - absl::ToChronoNanoseconds(options_.stream_idle_timeout);
  std::vector<std::shared_ptr<StreamSession>> ended;
  std::vector<std::shared_ptr<StreamSession>> idle;
  // Released outside the lock: the last owner's release takes it.
  std::vector<std::shared_ptr<Reservation>> idle_reservations;
  {
    absl::MutexLock lock(&mutex_);
    auto keep = std::partition(streams_.begin(), streams_.end(),
                               [](const auto& stream) { return !stream->ended(); });
    ended.assign(std::make_move_iterator(keep), std::make_move_iterator(streams_.end()));
    streams_.erase(keep, streams_.end());
    live_feeds_ -= static_cast<int>(ended.size());
    for (const auto& stream : streams_) {
      if (stream->IdleSince(idle_cutoff)) idle.push_back(stream);
    }
    reservations_.erase(std::remove_if(reservations_.begin(), reservations_.end(),
                                       [](const auto& weak) { return weak.expired(); }),
                        reservations_.end());
    for (const auto& weak : reservations_) {
      if (auto reservation = weak.lock();
          reservation != nullptr && reservation->IdleSince(idle_cutoff)) {
        idle_reservations.push_back(std::move(reservation));
      }
    }
  }
  for (const auto& stream : ended) stream->Join();  // outside the lock: it may take a moment
  const std::string idle_for = absl::FormatDuration(options_.stream_idle_timeout);
  for (const auto& stream : idle) {
    stream->Cancel(absl::DeadlineExceededError(
        absl::StrCat("the stream sent nothing for ", idle_for, " (idle timeout)")));
  }
  for (const auto& reservation : idle_reservations) {
    reservation->Expire(absl::DeadlineExceededError(absl::StrCat(
        reservation->kind() == Reservation::Kind::kStream ? "the stream sent no StreamConfig for "
                                                          : "the upload sent no message for ",
        idle_for, " (idle timeout)")));
  }
}

absl::Duration ClassifyEngine::EstimatedDecodeWait() const {
  const int ahead = decode_stage_.queued();
  if (ahead == 0) return absl::ZeroDuration();
  return absl::Seconds(recent_decode_seconds_.load() * ahead / options_.decode_slots);
}

void ClassifyEngine::Forget(ClassifyCall* call) {
  absl::MutexLock lock(&mutex_);
  unanswered_.erase(call);
}

std::shared_ptr<const ModelRepository> ClassifyEngine::repository() const {
  absl::MutexLock lock(&mutex_);
  return repository_;
}

void ClassifyEngine::ReplaceRepository(std::shared_ptr<const ModelRepository> repository) {
  absl::MutexLock lock(&mutex_);
  repository_ = std::move(repository);
}

bool ClassifyEngine::draining() const { return admission_->draining(); }

void ClassifyEngine::StartDraining() {
  admission_->StartDraining();
  std::vector<std::shared_ptr<StreamSession>> streams;
  {
    absl::MutexLock lock(&mutex_);
    streams = streams_;
  }
  const absl::Status reason =
      absl::UnavailableError("the server is draining; reconnect to another replica");
  for (const auto& stream : streams) stream->Cancel(reason);
  // A stream still waiting for its StreamConfig would be refused when it came: end it now.
  for (const auto& reservation : Reservations(Reservation::Kind::kStream)) {
    reservation->Expire(reason);
  }
}

std::vector<std::shared_ptr<Reservation>> ClassifyEngine::Reservations(Reservation::Kind kind) {
  std::vector<std::shared_ptr<Reservation>> held;
  {
    absl::MutexLock lock(&mutex_);
    for (const auto& weak : reservations_) {
      if (auto reservation = weak.lock()) held.push_back(std::move(reservation));
    }
  }
  // Outside the lock: a stream's reservation released here for the last time takes it.
  held.erase(
      std::remove_if(held.begin(), held.end(),
                     [kind](const auto& reservation) { return reservation->kind() != kind; }),
      held.end());
  return held;
}

bool ClassifyEngine::WaitUntilIdle(absl::Time deadline) {
  // Streams end on their own threads, with no condition to wait on here: poll.
  while (true) {
    // A call whose request is still arriving holds a reservation: an upload accepted before the
    // drain gets its drain timeout too.
    const std::vector<std::shared_ptr<Reservation>> calls_arriving =
        Reservations(Reservation::Kind::kCall);
    const bool arriving = std::any_of(calls_arriving.begin(), calls_arriving.end(),
                                      [](const auto& reservation) { return !reservation->over(); });
    if (!arriving) {
      absl::MutexLock lock(&mutex_);
      if (unanswered_.empty() && std::all_of(streams_.begin(), streams_.end(),
                                             [](const auto& stream) { return stream->ended(); })) {
        return true;
      }
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    absl::SleepFor(std::min(absl::Milliseconds(10), deadline - now));
  }
}

void ClassifyEngine::CancelAll(const absl::Status& reason) {
  std::vector<std::shared_ptr<ClassifyCall>> calls;
  {
    absl::MutexLock lock(&mutex_);
    for (const auto& [key, weak] : unanswered_) {
      if (auto call = weak.lock()) calls.push_back(std::move(call));
    }
  }
  for (const auto& call : calls) call->Cancel(reason);
  for (const auto& reservation : Reservations(Reservation::Kind::kCall)) {
    reservation->Expire(reason);
  }
}

EngineLoad ClassifyEngine::load() const {
  EngineLoad load;
  load.inflight_calls = admission_->inflight_calls();
  load.inflight_bytes = admission_->inflight_bytes();
  load.calls_waiting_to_decode = decode_stage_.queued() + arrival_stage_.queued();
  load.calls_decoding = calls_decoding_.load();
  load.frames_waiting_for_backbone = batcher_.queued_frames();
  absl::MutexLock lock(&mutex_);
  load.streams_awaiting_config = reserved_streams_;
  for (const auto& stream : streams_) {
    if (!stream->ended()) ++load.active_streams[stream->model_name()];
  }
  return load;
}

}  // namespace vidclf::engine
