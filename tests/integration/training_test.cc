// vidclf-train from outside: the real binary over real video files, and its bundles served by the
// real server. Small clips (4 frames at 32 px) keep it quick; what is checked does not depend on
// the size.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/onednn_resnet18.h"
#include "model/video_model.h"
#include "pipeline/video_pipeline.h"
#include "tests/test_util/built_paths.h"
#include "tests/test_util/server_process.h"
#include "tests/test_util/test_files.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf {
namespace {

namespace fs = std::filesystem;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr char kSmallClips[] = " --num-frames 4 --crop-size 32 --resize-shorter-side 32";

std::string Train(const std::string& arguments, int* exit_code = nullptr) {
  int code = 0;
  std::string output =
      testing::RunCommand(absl::StrCat(testing::TrainBinary(), " ", arguments, " 2>&1"), &code);
  if (exit_code != nullptr) {
    *exit_code = code;
  } else {
    EXPECT_EQ(code, 0) << arguments << "\n" << output;
  }
  return output;
}

// The finished embeddings in the cache (not the temporary files of an interrupted write).
std::vector<fs::path> CachedEmbeddings(const fs::path& work) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(work / "embeddings")) {
    if (entry.is_regular_file() && entry.path().extension() == ".pt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class TrainingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeScratchDir("training_test"));
    // Ten classes, four videos each: three to train on, one held out.
    Train(absl::StrCat("synth --output ", *dir_, "/data --videos-per-class 4 --min-frames 8 ",
                       "--max-frames 12"));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string Data() { return *dir_ + "/data"; }
  static std::string Lists() {
    return absl::StrCat(" --data ", Data(), "/videos --train-list ", Data(),
                        "/splits/trainlist01.txt --test-list ", Data(),
                        "/splits/testlist01.txt --class-index ", Data(), "/splits/classInd.txt");
  }

  static std::string* dir_;
};
std::string* TrainingTest::dir_ = nullptr;

// The cache holds exactly what the server's decode-and-embed path makes of the same file, and a
// second run after an interruption embeds only what is missing.
TEST_F(TrainingTest, EmbedIsTheServersTensorAndResumes) {
  const fs::path work = *dir_ + "/embed-work";
  const std::string embed = absl::StrCat(testing::TrainBinary(), " embed --work ", work.string(),
                                         Lists(), kSmallClips, " --jobs 1");
  int code = 0;
  // Killed part way (on a fast machine it may have finished): whatever it wrote is whole.
  testing::RunCommand("timeout -s KILL 2 " + embed + " >/dev/null 2>&1", &code);
  const size_t finished = CachedEmbeddings(work).size();
  const std::string resumed = testing::RunCommand(embed + " 2>&1", &code);
  ASSERT_EQ(code, 0) << resumed;
  if (finished > 0) {
    EXPECT_THAT(resumed, HasSubstr(absl::StrCat(finished, " clips already")));
  }
  EXPECT_THAT(resumed, HasSubstr(absl::StrCat("embedded ", 40 - finished, " clips")));

  std::vector<fs::path> files = CachedEmbeddings(work);
  ASSERT_EQ(files.size(), 40u);
  for (int i : {0, 7, 21}) fs::remove(files[i]);
  std::map<fs::path, fs::file_time_type> kept;
  for (const fs::path& file : CachedEmbeddings(work)) kept[file] = fs::last_write_time(file);
  const std::string again = testing::RunCommand(embed + " 2>&1", &code);
  ASSERT_EQ(code, 0) << again;
  EXPECT_THAT(again, HasSubstr("37 clips already embedded"));
  EXPECT_THAT(again, HasSubstr("embedded 3 clips"));
  ASSERT_EQ(CachedEmbeddings(work).size(), 40u);
  for (const auto& [file, time] : kept) EXPECT_EQ(fs::last_write_time(file), time) << file;

  auto backbone =
      model::VideoModel::Load((work / "backbone").string(), model::InferenceOptions::Exact());
  ASSERT_TRUE(backbone.ok()) << backbone.status();
  // "<class>/<file>" of a clip that the second run embedded again.
  const std::string clip = fs::relative(files[0], work / "embeddings").replace_extension().string();
  const std::string bytes = testing::ReadFile(Data() + "/videos/" + clip);
  media::ClipOptions options;
  options.sampling.num_frames = 4;
  auto served = pipeline::DecodeAndEmbed(**backbone, media::VideoSource::Bytes(bytes), options);
  ASSERT_TRUE(served.ok()) << served.status();
  torch::Tensor cached;
  torch::load(cached, (work / "embeddings" / (clip + ".pt")).string());
  EXPECT_TRUE(torch::equal(cached, served->embeddings)) << clip;

  // Other settings would mix inconsistent inputs: refused, naming the setting.
  const std::string refused =
      Train(absl::StrCat("embed --work ", work.string(), Lists(),
                         " --num-frames 4 --crop-size 48 --resize-shorter-side 48"),
            &code);
  EXPECT_EQ(code, 2);
  EXPECT_THAT(refused, HasSubstr("input.crop_size"));
}

// --backbone-kernels runs the cache's weights as the server does (folded, channels-last,
// Winograd): the same embeddings as the eager module's, to a relative 1e-4.
TEST_F(TrainingTest, EmbedsWithTheServersKernelsWhenAsked) {
  std::map<std::string, fs::path> works;
  for (const std::string kernels : {"eager", "winograd"}) {
    works[kernels] = *dir_ + "/kernels-" + kernels;
    Train(absl::StrCat("embed --work ", works[kernels].string(), Lists(), kSmallClips,
                       " --backbone-kernels ", kernels));
  }
  const std::vector<fs::path> eager = CachedEmbeddings(works["eager"]);
  const std::vector<fs::path> winograd = CachedEmbeddings(works["winograd"]);
  ASSERT_EQ(eager.size(), 40u);
  ASSERT_EQ(winograd.size(), eager.size());
  int differing = 0;  // other kernels round differently: some embeddings differ in their last bits
  for (size_t i = 0; i < eager.size(); ++i) {
    torch::Tensor expected;
    torch::Tensor actual;
    torch::load(expected, eager[i].string());
    torch::load(actual, winograd[i].string());
    const double scale = expected.abs().max().item<double>();
    EXPECT_LE((actual - expected).abs().max().item<double>(), 1e-4 * scale) << winograd[i];
    if (!torch::equal(actual, expected)) ++differing;
  }
  EXPECT_GT(differing, 0) << "the same embeddings: were the server's kernels used?";

  int code = 0;
  const std::string refused = Train(
      absl::StrCat("embed --work ", *dir_, "/kernels-bad", Lists(), " --backbone-kernels fast"),
      &code);
  EXPECT_NE(code, 0);
  EXPECT_THAT(refused, HasSubstr("--backbone-kernels: fast not in {eager,fused,winograd}"));
}

// A short fit drives the training loss down, writes its curves, and bad flags are named.
TEST_F(TrainingTest, FitLowersTheLossAndWritesItsCurves) {
  const std::string work = *dir_ + "/fit-work";
  Train(absl::StrCat("embed --work ", work, Lists(), kSmallClips));
  Train(absl::StrCat("fit --work ", work,
                     " --run tiny --head transformer --d-model 32 --num-heads 2 --num-layers 1 "
                     "--ffn-size 32 --epochs 12 --patience 0 --attention-substitutions clustered"));
  std::vector<double> losses;
  std::ifstream csv(work + "/runs/tiny/curves.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_THAT(line, HasSubstr("epoch,train_loss"));
  while (std::getline(csv, line)) {
    const std::vector<std::string> fields = absl::StrSplit(line, ',');
    losses.push_back(std::stod(fields[1]));
  }
  ASSERT_EQ(losses.size(), 12u);
  EXPECT_LT(losses.back(), 0.7 * losses.front());
  EXPECT_GT(fs::file_size(work + "/runs/tiny/curves.png"), 1000u);
  EXPECT_TRUE(fs::exists(work + "/runs/tiny/fit.json"));

  int code = 0;
  EXPECT_THAT(
      Train(absl::StrCat("fit --work ", work, " --run x --head transformer ", "--attention flash"),
            &code),
      HasSubstr("unknown attention type \"flash\""));
  EXPECT_EQ(code, 2);
  for (const char* bad : {"clustres=4", "clusters=four", "clusters"}) {
    const std::string output =
        Train(absl::StrCat("fit --work ", work,
                           " --run x --head transformer --attention-parameter ", bad),
              &code);
    EXPECT_THAT(output, AnyOf(HasSubstr("unknown attention parameter \"clustres\""),
                              HasSubstr("takes KEY=INTEGER")))
        << bad;
    EXPECT_EQ(code, 2) << bad;
  }
  EXPECT_THAT(Train(absl::StrCat("fit --work ", work, " --run x --head transformer ",
                                 "--d-model 30 --num-heads 4"),
                    &code),
              HasSubstr("head.num_heads"));
  EXPECT_THAT(Train(absl::StrCat("export --work ", work, " --run tiny --output-repository ", *dir_,
                                 "/never"),
                    &code),
              HasSubstr("no test metrics"));

  // eval reports on a split, with the run's own attention or a substitution its bundle allows,
  // and refuses one it does not allow by name.
  EXPECT_THAT(Train(absl::StrCat("eval --work ", work, " --run tiny --split test")),
              HasSubstr("MCC"));
  EXPECT_TRUE(fs::exists(work + "/runs/tiny/eval-test.json"));
  EXPECT_THAT(Train(absl::StrCat("eval --work ", work, " --run tiny --attention clustered")),
              HasSubstr("attention clustered"));
  EXPECT_TRUE(fs::exists(work + "/runs/tiny/eval-test-clustered.json"));
  EXPECT_THAT(Train(absl::StrCat("eval --work ", work, " --run tiny --attention linear"), &code),
              HasSubstr("cannot run with attention \"linear\""));
  EXPECT_EQ(code, 2);

  // --stream classifies each clip frame by frame, as a live stream; a causal-linear head's last
  // step is its forward over the whole clip, so the report is the same. Its int8 steps are
  // compared with float32 steps; a head without them is refused.
  EXPECT_THAT(Train(absl::StrCat("eval --work ", work, " --run tiny --stream")),
              HasSubstr("streamed frame by frame, float32 step weights"));
  EXPECT_THAT(
      Train(absl::StrCat("eval --work ", work, " --run tiny --stream --stream-step-weights int8"),
            &code),
      HasSubstr("no step of one frame in int8"));
  EXPECT_EQ(code, 2);
  EXPECT_THAT(
      Train(absl::StrCat("eval --work ", work, " --run tiny --stream-step-weights int8"), &code),
      HasSubstr("needs --stream"));
  EXPECT_EQ(code, 2);
  Train(absl::StrCat("fit --work ", work,
                     " --run causal --head transformer --attention causal-linear --d-model 32 "
                     "--num-heads 2 --num-layers 1 --ffn-size 32 --epochs 3 --patience 0"));
  Train(absl::StrCat("eval --work ", work, " --run causal"));
  Train(absl::StrCat("eval --work ", work, " --run causal --stream"));
  EXPECT_THAT(Train(absl::StrCat("eval --work ", work,
                                 " --run causal --stream --stream-step-weights int8")),
              HasSubstr("Against float32 steps: the same top class on"));
  const auto report = [&](const std::string& name) {
    std::ifstream file(work + "/runs/causal/" + name);
    return nlohmann::json::parse(file);
  };
  const nlohmann::json whole = report("eval-test.json");
  const nlohmann::json streamed = report("eval-test-stream-float32.json");
  const nlohmann::json int8 = report("eval-test-stream-int8.json");
  EXPECT_EQ(streamed["accuracy"], whole["accuracy"]);
  EXPECT_TRUE(streamed["stream"].get<bool>());
  EXPECT_EQ(int8["against_float32_steps"]["clips"], whole["total"]);
  EXPECT_LT(int8["against_float32_steps"]["max_probability_difference"].get<double>(), 0.05);

  // --backbone-precision bf16 embeds the test clips again with the backbone in bf16, where the CPU
  // has the instructions, and compares with fp32's cached embeddings; elsewhere it says why not.
  const std::string bf16 =
      Train(absl::StrCat("eval --work ", work, " --run causal --backbone-precision bf16"), &code);
  if (!model::OneDnnResNet18::Bf16Available()) {
    EXPECT_NE(code, 0);
    EXPECT_THAT(bf16, HasSubstr("bf16"));
  } else {
    EXPECT_EQ(code, 0) << bf16;
    EXPECT_THAT(bf16, HasSubstr("The backbone in bf16 against fp32: the same top class on"));
    const nlohmann::json against = report("eval-test-bf16.json")["against_float32_backbone"];
    EXPECT_EQ(against["clips"], whole["total"]);
    EXPECT_EQ(against["accuracy_fp32"], whole["accuracy"]);
    // bf16 keeps 8 bits of mantissa: the embeddings move, by well under a percent.
    EXPECT_GT(against["median_embedding_error"].get<double>(), 0);
    EXPECT_LT(against["largest_embedding_error"].get<double>(), 0.05);
    EXPECT_GE(against["same_top1"].get<int64_t>(), whole["total"].get<int64_t>() - 1);
  }
  EXPECT_THAT(
      Train(absl::StrCat("eval --work ", work, " --run causal --stream --backbone-precision bf16"),
            &code),
      HasSubstr("leave out --stream"));
  EXPECT_EQ(code, 2);

  // --backbone-precision int8 needs the work directory's calibration, and says how to make it;
  // calibrate measures it on training frames, and int8 then embeds the test clips again.
  const std::string uncalibrated =
      Train(absl::StrCat("eval --work ", work, " --run causal --backbone-precision int8"), &code);
  EXPECT_NE(code, 0);
  EXPECT_THAT(uncalibrated, HasSubstr(model::OneDnnResNet18::Int8Available()
                                          ? "run `vidclf-train calibrate --work WORK`"
                                          : "needs a CPU with VNNI instructions"));
  EXPECT_THAT(Train(absl::StrCat("calibrate --work ", work, " --frames 8"), &code),
              HasSubstr("--frames: Value 8 not in range 16 to 2048"));
  EXPECT_NE(code, 0);
  EXPECT_THAT(Train(absl::StrCat("calibrate --work ", work, " --frames 64"), &code),
              HasSubstr("ranges of 20 convolutions from 64 frames"));
  EXPECT_EQ(code, 0);
  nlohmann::json int8_backbone;
  if (model::OneDnnResNet18::Int8Available()) {
    const std::string int8_eval =
        Train(absl::StrCat("eval --work ", work, " --run causal --backbone-precision int8"), &code);
    EXPECT_EQ(code, 0) << int8_eval;
    EXPECT_THAT(int8_eval, HasSubstr("The backbone in int8 against fp32: the same top class on"));
    int8_backbone = report("eval-test-int8.json")["against_float32_backbone"];
    EXPECT_EQ(int8_backbone["clips"], whole["total"]);
    // int8's 8 bits move the embeddings by about 1.5% (the default models' median frame).
    EXPECT_GT(int8_backbone["median_embedding_error"].get<double>(), 0);
    EXPECT_LT(int8_backbone["largest_embedding_error"].get<double>(), 0.1);
  }

  // export records the bf16 evaluation in the bundle, and a server with --precision auto runs the
  // bundle's backbone in bf16 where the CPU has the instructions, saying why either way; a bundle
  // without the record stays fp32.
  const std::string repository = work + "/auto-repository";
  Train(absl::StrCat("export --work ", work, " --run causal --output-repository ", repository));
  Train(absl::StrCat("export --work ", work, " --run tiny --output-repository ", repository));
  std::ifstream causal_json(repository + "/causal/1/model.json");
  const nlohmann::json causal = nlohmann::json::parse(causal_json);
  if (model::OneDnnResNet18::Bf16Available()) {
    EXPECT_EQ(causal["metrics"]["backbone_precision"]["bf16"]["clips"], whole["total"]);
  }
  // The calibration travels with every bundle of the work directory; the evaluation with its run.
  EXPECT_TRUE(fs::exists(repository + "/causal/1/backbone_int8.json"));
  EXPECT_TRUE(fs::exists(repository + "/tiny/1/backbone_int8.json"));
  if (!int8_backbone.is_null()) {
    EXPECT_EQ(causal["metrics"]["backbone_precision"]["int8"], int8_backbone);
  }
  auto server = testing::ServerProcess::Start(
      testing::ServerBinary(), {"--model-repository", repository, "--precision", "auto"});
  ASSERT_TRUE(server.ok()) << server.status();
  // The line that starts with `start` in `text`.
  const auto line_of = [](const std::string& text, const std::string& start) {
    const size_t begin = text.find(start);
    return begin == std::string::npos ? std::string()
                                      : text.substr(begin, text.find('\n', begin) - begin);
  };
  const std::string causal_line = line_of((*server)->output(), "loaded model causal version 1");
  const std::string tiny_line = line_of((*server)->output(), "loaded model tiny version 1");
  // int8 where its recorded evaluation meets the bar (the few test clips here may miss it).
  const bool int8_chosen =
      !int8_backbone.is_null() &&
      int8_backbone["same_top1"].get<double>() >=
          model::kMinTop1Agreement * int8_backbone["clips"].get<double>() &&
      int8_backbone["accuracy_fp32"].get<double>() - int8_backbone["accuracy"].get<double>() <=
          model::kMaxAccuracyDrop;
  std::string expected_precision = "fp32";
  if (int8_chosen) {
    expected_precision = "int8";
    EXPECT_THAT(causal_line, HasSubstr("backbone in int8: this CPU has VNNI, and the bundle's "
                                       "int8 evaluation meets the bar"));
  } else if (model::OneDnnResNet18::Bf16Available()) {
    expected_precision = "bf16";
    EXPECT_THAT(causal_line, HasSubstr("backbone in bf16: this CPU has bf16 instructions, and the "
                                       "bundle's bf16 evaluation meets the bar"));
  } else {
    EXPECT_THAT(causal_line, HasSubstr("backbone in fp32: no bf16 instructions on this CPU"));
  }
  EXPECT_THAT(tiny_line, HasSubstr("backbone in fp32: "));
  EXPECT_THAT(tiny_line, HasSubstr(model::OneDnnResNet18::Int8Available()
                                       ? "the bundle records no int8 evaluation"
                                       : "no VNNI instructions on this CPU for int8"));
  if (model::OneDnnResNet18::Bf16Available()) {
    EXPECT_THAT(tiny_line, HasSubstr("the bundle records no bf16 evaluation"));
  }
  auto metrics = testing::HttpGet((*server)->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  std::string causal_info;
  for (const absl::string_view line : absl::StrSplit(*metrics, '\n')) {
    if (absl::StartsWith(line, "vidclf_model_info{") &&
        absl::StrContains(line, "model=\"causal\"")) {
      causal_info = std::string(line);
    }
  }
  EXPECT_THAT(causal_info, HasSubstr("precision=\"" + expected_precision + "\""));
}

// A user's own data set in the UCF101 layout, two classes, no split lists: trained, exported,
// served by the real server, which classifies the clips it was trained on as labelled, with the
// probabilities the head gives on the cached embeddings.
// The docs' table of mechanisms is the registry's own description, word for word.
TEST_F(TrainingTest, DocsListTheMechanismsAsTheRegistryDescribesThem) {
  int code = 0;
  const std::string table = Train("attention", &code);
  ASSERT_EQ(code, 0) << table;
  EXPECT_THAT(testing::ReadFile(testing::SourceDir() + std::string("/docs/attention.md")),
              HasSubstr(table))
      << "docs/attention.md should hold the output of `vidclf-train attention`:\n"
      << table;
  const nlohmann::json registry = nlohmann::json::parse(Train("attention --format json", &code));
  ASSERT_EQ(registry.size(), 8u);
  EXPECT_EQ(registry[4]["name"], "linformer");
  EXPECT_EQ(registry[4]["substitutable"], false);
  EXPECT_EQ(registry[4]["parameters"][0]["key"], "linformer_k");
}

// Timelines with their truth train a segmentation model per frame: the bundle says so, with its
// rate and the frame differences its head sees; eval scores its test timelines per frame and by
// the segments the server's tracker makes, and writes those segments in the format `eval
// --segments` reads, which scores them alike; export keeps the measures. What cannot be done is
// refused, saying why. (What the heads learn is docs/results.md's: these timelines are too short
// to learn from.)
TEST_F(TrainingTest, TimelinesTrainASegmentationModelPerFrame) {
  const std::string root = *dir_ + "/timelines";
  for (const auto& [split, seed] : {std::pair{"train", 5}, {"validation", 6}, {"test", 7}}) {
    Train(absl::StrCat("synth --timeline --timelines ", split == std::string("train") ? 2 : 1,
                       " --timeline-seconds 24 --seed ", seed, " --output ", root, "/", split));
  }
  const std::string truths =
      absl::StrCat(" --truth ", root, "/train/truth.json --validation-truth ", root,
                   "/validation/truth.json --test-truth ", root, "/test/truth.json");
  const std::string work = *dir_ + "/timeline-work";
  int code = 0;
  EXPECT_THAT(Train(absl::StrCat("embed --work ", work, truths, " --data ", Data()), &code),
              HasSubstr("excludes"));
  EXPECT_NE(code, 0);
  Train(absl::StrCat("embed --work ", work, truths, " --crop-size 32 --resize-shorter-side 32"));

  EXPECT_THAT(Train(absl::StrCat("fit --work ", work,
                                 " --run x --head transformer --attention causal-linear"),
                    &code),
              HasSubstr("needs --pooling last"));
  EXPECT_EQ(code, 2);
  EXPECT_THAT(Train(absl::StrCat("fit --work ", work, " --run seg --epochs 3 --patience 0")),
              HasSubstr("per frame (4 frames/s)"));
  const nlohmann::json config =
      nlohmann::json::parse(testing::ReadFile(work + "/runs/seg/model.json"));
  EXPECT_EQ(config["segmentation"]["frames_per_second"], 4.0);
  EXPECT_EQ(config["head"]["frame_differences"], true);

  EXPECT_THAT(Train(absl::StrCat("eval --work ", work, " --run seg")),
              HasSubstr("seg on 1 test timelines, per frame at 4 frames/s"));
  const nlohmann::json report =
      nlohmann::json::parse(testing::ReadFile(work + "/runs/seg/eval-test.json"));
  EXPECT_EQ(report["videos"], 1);
  EXPECT_GT(report["true_segments"].get<int>(), 1);
  for (const char* key : {"frame_accuracy", "sampled_frame_accuracy", "edit", "f1@0.50"}) {
    EXPECT_TRUE(report[key].is_number()) << key;
  }
  const nlohmann::json rescored = nlohmann::json::parse(
      Train(absl::StrCat("eval --segments --json --frame-step-seconds 0.25 --truth ", root,
                         "/test/truth.json --predicted ", work, "/runs/seg/segments-test.json")));
  for (const char* key : {"predicted_segments", "frame_accuracy", "edit", "f1@0.50", "map_mean"}) {
    EXPECT_EQ(rescored[key], report[key]) << key;
  }
  EXPECT_THAT(Train(absl::StrCat("eval --work ", work, " --run seg --stream"), &code),
              HasSubstr("scored per frame over whole timelines"));
  EXPECT_EQ(code, 2);

  const std::string repository = *dir_ + "/timeline-repository";
  EXPECT_THAT(
      Train(absl::StrCat("export --work ", work, " --run seg --output-repository ", repository)),
      HasSubstr("test frame accuracy"));
  const nlohmann::json exported =
      nlohmann::json::parse(testing::ReadFile(repository + "/seg/1/model.json"));
  EXPECT_EQ(exported["metrics"]["edit"], report["edit"]);
  EXPECT_EQ(exported["segmentation"], config["segmentation"]);
}

TEST_F(TrainingTest, Ucf101LayoutTrainsExportsAndServes) {
  const fs::path root = *dir_ + "/mine";
  std::map<std::string, std::string> classes = {{"Brighten", "fade_in"}, {"Darken", "fade_out"}};
  for (const auto& [name, source] : classes) {
    fs::create_directories(root / name);
    for (const auto& entry : fs::directory_iterator(Data() + "/videos/" + source)) {
      fs::copy_file(entry.path(),
                    root / name / ("v_" + name + "_" + entry.path().filename().string()));
    }
  }
  const std::string work = *dir_ + "/mine-work";
  const std::string repository = *dir_ + "/repository";
  const std::string output =
      Train(absl::StrCat("all --data ", root.string(), " --work ", work,
                         " --run mine --output-repository ", repository, kSmallClips,
                         " --test-fraction 0.25 --validation-fraction 0 --epochs 150 --patience 0 "
                         "--gru-hidden-size 16"));
  EXPECT_THAT(output, HasSubstr("wrote " + repository + "/mine/1"));
  std::ifstream model_json(repository + "/mine/1/model.json");
  const nlohmann::json bundle = nlohmann::json::parse(model_json);
  EXPECT_EQ(bundle["labels"], nlohmann::json({"Brighten", "Darken"}));
  EXPECT_TRUE(bundle["metrics"].contains("mcc"));
  EXPECT_EQ(bundle["provenance"]["made_by"], "vidclf-train");

  auto model = model::VideoModel::Load(repository + "/mine/1");
  ASSERT_TRUE(model.ok()) << model.status();
  auto server =
      testing::ServerProcess::Start(testing::ServerBinary(), {"--model-repository", repository});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::VideoClassifier::NewStub(
      grpc::CreateChannel((*server)->grpc_address(), grpc::InsecureChannelCredentials()));
  std::ifstream dataset_json(work + "/dataset.json");
  const nlohmann::json dataset = nlohmann::json::parse(dataset_json);
  int trained_on = 0;
  for (const nlohmann::json& clip : dataset["clips"]) {
    if (clip["split"] != "train") continue;
    ++trained_on;
    const std::string path = clip["path"];
    v1::ClassifyRequest request;
    request.set_video(testing::ReadFile(root.string() + "/" + path));
    request.set_top_k(2);
    v1::ClassifyResponse response;
    grpc::ClientContext context;
    const grpc::Status status = stub->Classify(&context, request, &response);
    ASSERT_TRUE(status.ok()) << path << ": " << status.error_message();
    EXPECT_EQ(response.top_k(0).label(), path.substr(0, path.find('/'))) << path;

    torch::Tensor cached;
    torch::load(cached, work + "/embeddings/" + path + ".pt");
    auto probabilities =
        (*model)->Classify(cached.unsqueeze(0), torch::tensor({cached.size(0)}, torch::kLong));
    ASSERT_TRUE(probabilities.ok());
    const int64_t top = probabilities->argmax(1).item<int64_t>();
    EXPECT_NEAR(response.top_k(0).score(), (*probabilities)[0][top].item<float>(), 1e-5) << path;
  }
  EXPECT_EQ(trained_on, 6);  // four clips per class, one held out
}

}  // namespace
}  // namespace vidclf
