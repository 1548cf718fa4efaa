// The engine on its own, with real FFmpeg decoding of files made by the ffmpeg CLI and a real
// (small, seeded) model: batching across calls, cancellation, admission, deadlines, drain and
// reload.
#include "server/engine/classify_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "model/thread_affinity.h"
#include "model/video_model.h"
#include "tests/server/engine/counting_observer.h"
#include "tests/test_util/test_files.h"
#include "tests/test_util/test_models.h"

namespace vidclf::engine {
namespace {

using testing::CountingObserver;
using ::testing::HasSubstr;

// A video whose uniform sampling decodes all of it (one keyframe, no B-frames): 2000 frames at
// 720p in 5 MB, about 2 s of decoding on one core.
constexpr char kLongVideo[] =
    "-f lavfi -i testsrc2=size=1280x720:rate=25 -frames:v 2000 -c:v libx264 -preset superfast "
    "-crf 45 -g 100000 -bf 0";

class ClassifyEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeScratchDir("engine"));
    testing::SaveModel(testing::TinyConfig(), *dir_ + "/repo/tiny/1");
    model::ModelConfig second = testing::TinyConfig();
    second.version = "2";
    testing::SaveModel(second, *dir_ + "/repo2/tiny/2", /*seed=*/2);
    // Two models with one backbone and different heads, as heads trained on a frozen backbone are.
    testing::SaveModel(testing::TinyConfig(), *dir_ + "/shared/tiny/1");
    model::ModelConfig other_head = testing::TinyConfig();
    other_head.name = "other-head";
    testing::SaveModel(other_head, *dir_ + "/shared/other-head/1", /*seed=*/2);
    std::filesystem::copy_file(*dir_ + "/shared/tiny/1/backbone.pt",
                               *dir_ + "/shared/other-head/1/backbone.pt",
                               std::filesystem::copy_options::overwrite_existing);
    model::ModelConfig own_backbone = testing::TinyConfig();
    own_backbone.name = "own-backbone";
    testing::SaveModel(own_backbone, *dir_ + "/shared/own-backbone/1", /*seed=*/3);
    *videos_ = testing::DistinctClips(*dir_);
    *long_video_ = testing::ReadFile(testing::CachedVideo(kLongVideo, ".mp4"));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static std::shared_ptr<const ModelRepository> Repository(
      const std::string& name = "repo",
      const model::InferenceOptions& inference = model::InferenceOptions::Exact()) {
    auto repository = ModelRepository::Load(*dir_ + "/" + name, "", inference);
    EXPECT_TRUE(repository.ok()) << repository.status();
    return repository.ok() ? std::shared_ptr<const ModelRepository>(*std::move(repository))
                           : nullptr;
  }

  static std::unique_ptr<ClassifyEngine> Engine(
      EngineOptions options, EngineObserver* observer = nullptr,
      std::shared_ptr<const ModelRepository> repository = Repository()) {
    auto engine = ClassifyEngine::Create(options, std::move(repository), observer);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  // A call whose answer arrives in a future.
  struct Pending {
    std::unique_ptr<CallHandle> handle;
    std::future<absl::StatusOr<ClassifyResult>> answer;
  };
  static Pending Submit(ClassifyEngine& engine, ClassifyInput input) {
    auto promise = std::make_shared<std::promise<absl::StatusOr<ClassifyResult>>>();
    Pending pending;
    pending.answer = promise->get_future();
    pending.handle = engine.Submit(std::move(input), [promise](absl::StatusOr<ClassifyResult> r) {
      promise->set_value(std::move(r));
    });
    return pending;
  }
  static ClassifyInput Input(const std::string& video) {
    ClassifyInput input;
    input.source = media::VideoSource::Bytes(video);
    input.top_k = 3;  // every label, so that all scores can be compared
    return input;
  }
  // A stage thread lets go of a call just after answering it: wait a little for that.
  static void ExpectNothingHeld(const ClassifyEngine& engine) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (engine.load().inflight_calls > 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_EQ(engine.load().inflight_calls, 0);
    EXPECT_EQ(engine.load().inflight_bytes, 0);
  }
  static std::map<std::string, float> Scores(const ClassifyResult& result) {
    std::map<std::string, float> scores;
    for (const auto& [label, score] : result.top_k) scores[label] = score;
    return scores;
  }

  static std::string* dir_;
  static std::vector<std::string>* videos_;
  static std::string* long_video_;
};

std::string* ClassifyEngineTest::dir_ = nullptr;
std::vector<std::string>* ClassifyEngineTest::videos_ = new std::vector<std::string>();
std::string* ClassifyEngineTest::long_video_ = new std::string();

// Many calls at once, batched across calls, get the answers each gets alone with batches of one.
TEST_F(ClassifyEngineTest, BatchesAcrossCallsWithTheAnswersOfCallsAlone) {
  EngineOptions alone_options;
  alone_options.batching.max_batch_frames = 1;
  std::unique_ptr<ClassifyEngine> alone = Engine(alone_options);
  ASSERT_NE(alone, nullptr);
  std::vector<std::map<std::string, float>> expected;
  for (const std::string& video : *videos_) {
    auto answer = Submit(*alone, Input(video)).answer.get();
    ASSERT_TRUE(answer.ok()) << answer.status();
    expected.push_back(Scores(*answer));
  }

  EngineOptions batched_options;
  batched_options.batching.max_batch_frames = 16;
  batched_options.batching.max_queue_delay = absl::Milliseconds(50);
  CountingObserver observer;
  std::unique_ptr<ClassifyEngine> batched = Engine(batched_options, &observer);
  ASSERT_NE(batched, nullptr);
  std::vector<Pending> pending;
  for (int round = 0; round < 4; ++round) {
    for (const std::string& video : *videos_) pending.push_back(Submit(*batched, Input(video)));
  }
  for (size_t i = 0; i < pending.size(); ++i) {
    auto answer = pending[i].answer.get();
    ASSERT_TRUE(answer.ok()) << answer.status();
    const std::map<std::string, float> scores = Scores(*answer);
    for (const auto& [label, score] : expected[i % videos_->size()]) {
      EXPECT_NEAR(scores.at(label), score, 1e-4) << "call " << i << ", " << label;
    }
    EXPECT_EQ(answer->frame_timestamps_seconds.size(), 4u);
  }
  EXPECT_EQ(observer.embedded(), 16 * 4);
  const std::vector<int> sizes = observer.batch_sizes();
  EXPECT_GT(*std::max_element(sizes.begin(), sizes.end()), 4)
      << "no batch mixed the frames of several calls";
  pending.clear();  // the handles hold the calls, as the service's reactors do
  ExpectNothingHeld(*batched);
}

// Models that share a fused backbone share its batches, and each call still gets its own head.
TEST_F(ClassifyEngineTest, ModelsSharingABackboneShareBatches) {
  model::InferenceOptions fused = model::InferenceOptions::Exact();
  fused.backbone_kernels = model::BackboneKernels::kFused;
  std::shared_ptr<const ModelRepository> repository = Repository("shared", fused);
  ASSERT_NE(repository, nullptr);
  ASSERT_EQ((*repository->Find("tiny"))->backbone_key(),
            (*repository->Find("other-head"))->backbone_key());
  ASSERT_NE((*repository->Find("tiny"))->backbone_key(),
            (*repository->Find("own-backbone"))->backbone_key());
  auto input = [&](const std::string& model, const std::string& video) {
    ClassifyInput in = Input(video);
    in.model = model;
    return in;
  };

  EngineOptions alone_options;
  alone_options.batching.max_batch_frames = 1;
  std::unique_ptr<ClassifyEngine> alone = Engine(alone_options, nullptr, repository);
  ASSERT_NE(alone, nullptr);
  std::map<std::string, std::map<std::string, float>> expected;
  for (const char* model : {"tiny", "other-head"}) {
    auto answer = Submit(*alone, input(model, videos_->front())).answer.get();
    ASSERT_TRUE(answer.ok()) << answer.status();
    expected[model] = Scores(*answer);
  }
  EXPECT_NE(expected["tiny"], expected["other-head"]);

  // While a long call of a third backbone decodes, the short calls' frames wait up to
  // max_queue_delay for others: their 4 + 4 frames run as one batch.
  EngineOptions options;
  options.batching.max_batch_frames = 16;
  options.batching.max_queue_delay = absl::Seconds(1);
  CountingObserver observer;
  std::unique_ptr<ClassifyEngine> engine = Engine(options, &observer, repository);
  ASSERT_NE(engine, nullptr);
  Pending long_call = Submit(*engine, input("own-backbone", *long_video_));
  std::vector<Pending> pending;
  for (const char* model : {"tiny", "other-head"}) {
    pending.push_back(Submit(*engine, input(model, videos_->front())));
  }
  for (Pending& call : pending) {
    auto answer = call.answer.get();
    ASSERT_TRUE(answer.ok()) << answer.status();
    for (const auto& [label, score] : expected[answer->model]) {
      EXPECT_NEAR(Scores(*answer).at(label), score, 1e-4) << answer->model << ", " << label;
    }
  }
  const std::vector<int> sizes = observer.batch_sizes();
  EXPECT_THAT(sizes, ::testing::Contains(8)) << "no batch held the frames of both models";
}

// A call's frames wait for the rest of the call while it decodes, so that the backbone does not
// take cores from its decoder: one batch once decoding ends, or full batches before.
TEST_F(ClassifyEngineTest, EmbedsACallsFramesOnceItsDecodingEnds) {
  EngineOptions options;
  options.batching.max_batch_frames = 16;
  options.batching.max_queue_delay = absl::Microseconds(100);
  CountingObserver observer;
  std::unique_ptr<ClassifyEngine> engine = Engine(options, &observer);
  ASSERT_NE(engine, nullptr);
  ClassifyInput twelve = Input(videos_->front());
  twelve.sampling.num_frames = 12;
  auto answer = Submit(*engine, twelve).answer.get();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_THAT(observer.batch_sizes(), ::testing::ElementsAre(12));

  ClassifyInput every_frame = Input(videos_->front());  // 30 frames
  every_frame.sampling.strategy = media::SamplingStrategy::kAll;
  answer = Submit(*engine, every_frame).answer.get();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_THAT(observer.batch_sizes(), ::testing::ElementsAre(12, 16, 14));
  ExpectNothingHeld(*engine);
}

// Cancelled calls stop: the one decoding stops at its next packet, the ones waiting never start;
// their frames and bytes are given back, and a short call after them is not held up.
TEST_F(ClassifyEngineTest, CancelledCallsStopAndHandBackWhatTheyHeld) {
  EngineOptions options;
  options.decode_slots = 1;
  std::unique_ptr<ClassifyEngine> engine = Engine(options);
  ASSERT_NE(engine, nullptr);

  const absl::Time alone_start = absl::Now();
  ASSERT_TRUE(Submit(*engine, Input(*long_video_)).answer.get().ok());
  const absl::Duration long_call = absl::Now() - alone_start;
  ExpectNothingHeld(*engine);  // a call hands its admission back just after its answer

  std::vector<Pending> cancelled;
  for (int i = 0; i < 4; ++i) cancelled.push_back(Submit(*engine, Input(*long_video_)));
  EXPECT_EQ(engine->load().inflight_calls, 4);
  EXPECT_GT(engine->load().inflight_bytes, 4 * static_cast<int64_t>(long_video_->size()));
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time cancelled_at = absl::Now();
  for (Pending& call : cancelled) call.handle->Cancel(absl::CancelledError("client went away"));
  for (Pending& call : cancelled) {
    auto answer = call.answer.get();
    EXPECT_EQ(answer.status().code(), absl::StatusCode::kCancelled) << answer.status();
  }
  EXPECT_LT(absl::Now() - cancelled_at, long_call / 2)
      << "a cancelled call went on decoding; a whole call takes " << long_call;
  cancelled.clear();  // the handles hold the calls, as the service's reactors do
  ExpectNothingHeld(*engine);

  const absl::Time short_start = absl::Now();
  ASSERT_TRUE(Submit(*engine, Input((*videos_)[0])).answer.get().ok());
  EXPECT_LT(absl::Now() - short_start, long_call / 2);
}

// Heads run with their own LibTorch intra-op threads (0: as many as the engine's cores), whatever
// the backbone runs with; a call's answer comes from the head thread that ran its head.
TEST_F(ClassifyEngineTest, HeadsRunWithTheirOwnIntraOpThreads) {
  for (const auto& [threads, expected] : {std::pair{0, 3}, std::pair{1, 1}, std::pair{4, 4}}) {
    EngineOptions options;
    options.cores = 3;
    options.head_intra_op_threads = threads;
    std::unique_ptr<ClassifyEngine> engine = Engine(options);
    ASSERT_NE(engine, nullptr);
    std::promise<int> seen;
    std::unique_ptr<CallHandle> handle =
        engine->Submit(Input((*videos_)[0]), [&seen](absl::StatusOr<ClassifyResult> result) {
          seen.set_value(result.ok() ? at::get_num_threads() : -1);
        });
    EXPECT_EQ(seen.get_future().get(), expected) << threads;
  }
  EngineOptions negative;
  negative.head_intra_op_threads = -1;
  EXPECT_EQ(ClassifyEngine::Create(negative, Repository()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The names of this process's threads (/proc/self/task/TID/comm).
std::set<std::string> ThreadNames() {
  std::set<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) names.insert(name);
  }
  return names;
}

// The engine's threads carry their stage's name, so that `top -H` and /proc say where its time
// goes.
TEST_F(ClassifyEngineTest, NamesItsThreadsByStage) {
  EngineOptions options;
  options.cores = 2;
  std::unique_ptr<ClassifyEngine> engine = Engine(options);
  ASSERT_NE(engine, nullptr);
  const std::set<std::string> expected = {"vidclf-backbone", "vidclf-head", "vidclf-decode",
                                          "vidclf-arrival", "vidclf-watchdog"};
  // Each thread names itself as it starts.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::set<std::string> names = ThreadNames();
  while (!std::includes(names.begin(), names.end(), expected.begin(), expected.end()) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
    names = ThreadNames();
  }
  EXPECT_THAT(names, ::testing::IsSupersetOf(expected));
}

// The CPUs of this process's threads that are bound to a single CPU, one entry per thread.
std::multiset<int> CpusOfThreadsBoundToOne() {
  std::multiset<int> cpus;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    cpu_set_t set;
    CPU_ZERO(&set);
    const pid_t tid = std::stoi(task.path().filename().string());
    if (sched_getaffinity(tid, sizeof(set), &set) != 0 || CPU_COUNT(&set) != 1) continue;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.insert(cpu);
    }
  }
  return cpus;
}

// Where the process may run on exactly the engine's cores, the backbone's intra-op threads are
// bound one per CPU once a batch has run on all of them; with the option off, or with cores that
// differ from the CPUs the process may use, no thread is bound.
TEST_F(ClassifyEngineTest, BindsTheBackbonesThreadsOnlyToCpusItOwns) {
  const std::vector<int> cpus = model::AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: every thread runs on it anyway";
  const int cores = static_cast<int>(cpus.size());
  struct Case {
    bool bind;
    int cores;
    bool bound;
  };
  // The unbound cases first: a bound engine's threads may outlive it for a moment.
  for (const Case& c :
       {Case{false, cores, false}, Case{true, cores + 1, false}, Case{true, cores, true}}) {
    EngineOptions options;
    options.cores = c.cores;
    options.bind_backbone_threads = c.bind;
    std::unique_ptr<ClassifyEngine> engine = Engine(options);
    ASSERT_NE(engine, nullptr);
    ASSERT_TRUE(Submit(*engine, Input((*videos_)[0])).answer.get().ok());
    EXPECT_EQ(engine->options().batching.cpus, c.bound ? cpus : std::vector<int>{});
    EXPECT_EQ(CpusOfThreadsBoundToOne(),
              c.bound ? std::multiset<int>(cpus.begin(), cpus.end()) : std::multiset<int>{})
        << "bind " << c.bind << ", cores " << c.cores;
  }
}

// On a GPU the backbone's intra-op threads only launch kernels: none is bound there.
TEST_F(ClassifyEngineTest, BindsNoThreadWhereTheModelsRunOnAGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";
  model::InferenceOptions on_gpu = model::InferenceOptions::Exact();
  on_gpu.device = torch::Device(torch::kCUDA, 0);
  EngineOptions options;
  options.cores = static_cast<int>(model::AllowedCpus().size());
  options.bind_backbone_threads = true;
  std::unique_ptr<ClassifyEngine> engine = Engine(options, nullptr, Repository("repo", on_gpu));
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(Submit(*engine, Input((*videos_)[0])).answer.get().ok());
  EXPECT_TRUE(engine->options().batching.cpus.empty());
}

// Frames decoded on the CPU for a GPU model are gathered in pinned memory and copied to the GPU
// asynchronously: four calls at once, batched, get the CPU model's answers.
TEST_F(ClassifyEngineTest, AGpuModelAnswersCpuDecodedFramesAsTheCpuModelDoes) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU";
  model::InferenceOptions on_gpu = model::InferenceOptions::Exact();
  on_gpu.device = torch::Device(torch::kCUDA, 0);
  std::unique_ptr<ClassifyEngine> cpu = Engine(EngineOptions());
  std::unique_ptr<ClassifyEngine> gpu =
      Engine(EngineOptions(), nullptr, Repository("repo", on_gpu));
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  std::vector<Pending> pending;
  for (const std::string& video : *videos_) pending.push_back(Submit(*gpu, Input(video)));
  for (size_t i = 0; i < pending.size(); ++i) {
    const auto from_gpu = pending[i].answer.get();
    const auto from_cpu = Submit(*cpu, Input((*videos_)[i])).answer.get();
    ASSERT_TRUE(from_gpu.ok() && from_cpu.ok()) << from_gpu.status() << from_cpu.status();
    for (const auto& [label, score] : Scores(*from_cpu)) {
      EXPECT_NEAR(Scores(*from_gpu).at(label), score, 1e-3) << "video " << i << ", " << label;
    }
  }
}

// Past the bound on calls or on bytes, calls are refused at once and nothing is queued.
TEST_F(ClassifyEngineTest, RefusesPastItsBoundsAtOnce) {
  EngineOptions options;
  options.decode_slots = 1;
  options.admission.max_inflight_calls = 2;
  CountingObserver observer;
  std::unique_ptr<ClassifyEngine> engine = Engine(options, &observer);
  ASSERT_NE(engine, nullptr);
  std::vector<Pending> admitted;
  admitted.push_back(Submit(*engine, Input(*long_video_)));
  admitted.push_back(Submit(*engine, Input(*long_video_)));
  Pending refused = Submit(*engine, Input((*videos_)[0]));
  EXPECT_EQ(refused.handle, nullptr);
  ASSERT_EQ(refused.answer.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  const auto answer = refused.answer.get();
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(answer.status().message(), HasSubstr("2 calls are in flight"));
  EXPECT_EQ(observer.refused(Refusal::kRequests), 1);
  for (Pending& call : admitted) call.handle->Cancel(absl::CancelledError("done"));
  for (Pending& call : admitted) (void)call.answer.get();  // cancelled: only that it ends
  admitted.clear();

  options.admission.max_inflight_calls = 64;
  options.admission.max_inflight_bytes = static_cast<int64_t>(long_video_->size()) + (1 << 20);
  engine = Engine(options, &observer);
  admitted.push_back(Submit(*engine, Input(*long_video_)));
  Pending too_big = Submit(*engine, Input(*long_video_));
  EXPECT_EQ(too_big.handle, nullptr);
  EXPECT_EQ(too_big.answer.get().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(observer.refused(Refusal::kBytes), 1);
  admitted[0].handle->Cancel(absl::CancelledError("done"));
  (void)admitted[0].answer.get();
}

// A reservation holds a call's or a stream's place before its request arrives: it counts against
// the bounds, a call can take it over, and one left idle expires once, telling its owner.
TEST_F(ClassifyEngineTest, ReservationsCountUntilTakenOverOrIdle) {
  EngineOptions options;
  options.admission.max_inflight_calls = 1;
  options.max_streams = 1;
  options.stream_idle_timeout = absl::Milliseconds(300);
  CountingObserver observer;
  std::unique_ptr<ClassifyEngine> engine = Engine(options, &observer);
  ASSERT_NE(engine, nullptr);

  std::atomic<int> expired{0};
  absl::Notification stream_expired;
  absl::StatusOr<std::shared_ptr<Reservation>> call =
      engine->ReserveCall([&](const absl::Status&) { ++expired; });
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<std::shared_ptr<Reservation>> stream =
      engine->ReserveStream([&](const absl::Status& status) {
        EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
        EXPECT_THAT(status.message(), HasSubstr("no StreamConfig"));
        stream_expired.Notify();
      });
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(engine->load().inflight_calls, 1);
  EXPECT_EQ(engine->load().streams_awaiting_config, 1);
  // The bounds count them: neither another call nor another stream gets in.
  EXPECT_EQ(Submit(*engine, Input((*videos_)[0])).answer.get().status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(engine->ReserveStream([](const absl::Status&) {}).status().code(),
            absl::StatusCode::kResourceExhausted);

  // The call takes its place over and is answered; the place goes with the answer.
  auto promise = std::make_shared<std::promise<absl::StatusOr<ClassifyResult>>>();
  std::unique_ptr<CallHandle> handle = engine->Submit(
      Input((*videos_)[0]),
      [promise](absl::StatusOr<ClassifyResult> result) { promise->set_value(std::move(result)); },
      *call);
  ASSERT_NE(handle, nullptr);
  EXPECT_TRUE(promise->get_future().get().ok());
  handle.reset();
  (*call)->Close();
  ExpectNothingHeld(*engine);

  // The stream's, left idle, expires once; taking it over then is refused; closing it frees it.
  ASSERT_TRUE(stream_expired.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE((*stream)->HandOver());
  EXPECT_EQ(engine->load().streams_awaiting_config, 1);
  (*stream)->Close();
  EXPECT_EQ(engine->load().streams_awaiting_config, 0);
  EXPECT_EQ(expired, 0);  // the call's was taken over in time
}

// A drain waits for the calls whose request is still arriving, as for those submitted; cancelling
// what is left ends them too. A stream still waiting for its StreamConfig ends when the drain
// starts.
TEST_F(ClassifyEngineTest, DrainWaitsForReservedCallsAndEndsReservedStreams) {
  std::unique_ptr<ClassifyEngine> engine = Engine(EngineOptions{});
  ASSERT_NE(engine, nullptr);
  absl::Notification call_ended;
  absl::Notification stream_ended;
  absl::StatusOr<std::shared_ptr<Reservation>> call =
      engine->ReserveCall([&](const absl::Status& status) {
        EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
        EXPECT_THAT(status.message(), HasSubstr("shut down"));
        call_ended.Notify();
      });
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<std::shared_ptr<Reservation>> stream =
      engine->ReserveStream([&](const absl::Status& status) {
        EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
        EXPECT_THAT(status.message(), HasSubstr("draining"));
        stream_ended.Notify();
      });
  ASSERT_TRUE(stream.ok()) << stream.status();

  engine->StartDraining();
  EXPECT_TRUE(stream_ended.HasBeenNotified());
  (*stream)->Close();
  EXPECT_FALSE(call_ended.HasBeenNotified());
  EXPECT_FALSE(engine->WaitUntilIdle(absl::Now() + absl::Milliseconds(200)));
  engine->CancelAll(absl::UnavailableError("the server shut down before the call finished"));
  EXPECT_TRUE(call_ended.HasBeenNotified());
  (*call)->Close();
  EXPECT_TRUE(engine->WaitUntilIdle(absl::Now()));
  ExpectNothingHeld(*engine);
}

// A deadline that has passed, or that the queue ahead would outlast, is refused at once; one that
// passes while the call waits abandons it.
TEST_F(ClassifyEngineTest, RefusesOrAbandonsCallsPastTheirDeadline) {
  EngineOptions options;
  options.decode_slots = 1;
  CountingObserver observer;
  std::unique_ptr<ClassifyEngine> engine = Engine(options, &observer);
  ASSERT_NE(engine, nullptr);
  ClassifyInput expired = Input((*videos_)[0]);
  expired.deadline = absl::Now() - absl::Seconds(1);
  EXPECT_EQ(Submit(*engine, expired).answer.get().status().code(),
            absl::StatusCode::kDeadlineExceeded);

  // Teach the engine how long the long video takes, then queue two behind one.
  ASSERT_TRUE(Submit(*engine, Input(*long_video_)).answer.get().ok());
  std::vector<Pending> ahead;
  for (int i = 0; i < 3; ++i) ahead.push_back(Submit(*engine, Input(*long_video_)));
  ClassifyInput hopeless = Input((*videos_)[0]);
  hopeless.deadline = absl::Now() + absl::Milliseconds(200);
  Pending refused = Submit(*engine, hopeless);
  EXPECT_EQ(refused.handle, nullptr);
  EXPECT_EQ(refused.answer.get().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(observer.refused(Refusal::kDeadline), 2);
  for (Pending& call : ahead) call.handle->Cancel(absl::CancelledError("done"));
  for (Pending& call : ahead) (void)call.answer.get();

  ClassifyInput expires_while_decoding = Input(*long_video_);
  expires_while_decoding.deadline = absl::Now() + absl::Milliseconds(300);
  EXPECT_EQ(Submit(*engine, expires_while_decoding).answer.get().status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// Draining refuses new calls with UNAVAILABLE and lets those in flight finish.
TEST_F(ClassifyEngineTest, DrainingFinishesCallsInFlightAndRefusesNewOnes) {
  std::unique_ptr<ClassifyEngine> engine = Engine({});
  ASSERT_NE(engine, nullptr);
  std::vector<Pending> inflight;
  for (const std::string& video : *videos_) inflight.push_back(Submit(*engine, Input(video)));
  engine->StartDraining();
  Pending refused = Submit(*engine, Input((*videos_)[0]));
  EXPECT_EQ(refused.answer.get().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(engine->WaitUntilIdle(absl::Now() + absl::Seconds(60)));
  for (Pending& call : inflight) EXPECT_TRUE(call.answer.get().ok());
}

// A new repository serves the calls submitted after it; a call in flight keeps its model.
TEST_F(ClassifyEngineTest, ReplacesTheRepositoryWithoutDroppingCalls) {
  std::unique_ptr<ClassifyEngine> engine = Engine({});
  ASSERT_NE(engine, nullptr);
  Pending before = Submit(*engine, Input(*long_video_));
  engine->ReplaceRepository(Repository("repo2"));
  auto after = Submit(*engine, Input((*videos_)[0])).answer.get();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->model_version, "2");
  auto first = before.answer.get();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->model_version, "1");
}

// Versions compare as numbers when both are, so 10 is served before 9; all are listed.
TEST(ModelRepositoryTest, ServesTheHighestVersionAndListsThemAll) {
  const std::string dir = testing::MakeScratchDir("versions");
  model::ModelConfig config = testing::TinyConfig();
  config.name = "m";
  for (const char* version : {"2", "10", "9"}) {
    config.version = version;
    testing::SaveModel(config, dir + "/m/" + version);
  }
  std::filesystem::create_directories(dir + "/m/11-not-a-bundle");
  auto repository = ModelRepository::Load(dir, "");
  ASSERT_TRUE(repository.ok()) << repository.status();
  auto entry = (*repository)->FindEntry("m");
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ((*entry)->model->config().version, "10");
  EXPECT_THAT((*entry)->versions, ::testing::ElementsAre("2", "9", "10"));
  EXPECT_TRUE(VersionLess("9", "10"));
  EXPECT_TRUE(VersionLess("10", "a"));
  EXPECT_EQ((*repository)->Find("other").status().code(), absl::StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vidclf::engine
