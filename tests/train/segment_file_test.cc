// The segment file format and `vidclf-train eval --segments` over two such files.
#include "train/segment_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "train/commands.h"

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(SegmentFileTest, RoundTripsAndSortsSegmentsByStart) {
  absl::StatusOr<std::vector<VideoSegments>> parsed = ParseSegmentFile(R"({"videos": [
      {"video": "a.mp4", "duration_seconds": 30, "segments": [
        {"label": "zoom_in", "start_seconds": 10, "end_seconds": 30, "mean_score": 0.75,
         "peak_score": 1, "extra": "ignored"},
        {"label": "fade_in", "start_seconds": 0, "end_seconds": 10}]},
      {"video": "b.mp4", "segments": []}]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  const VideoSegments& a = (*parsed)[0];
  EXPECT_EQ(a.duration_seconds, 30);
  ASSERT_EQ(a.segments.size(), 2u);
  EXPECT_EQ(a.segments[0].label, "fade_in");
  EXPECT_FALSE(a.segments[0].mean_score.has_value());
  EXPECT_EQ(a.segments[1].mean_score, 0.75);
  EXPECT_FALSE((*parsed)[1].duration_seconds.has_value());

  absl::StatusOr<std::vector<VideoSegments>> again = ParseSegmentFile(SegmentFileText(*parsed));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(SegmentFileText(*again), SegmentFileText(*parsed));
}

TEST(SegmentFileTest, NamesTheVideoAndSegmentOfWhatBreaksTheFormat) {
  const auto error = [](const std::string& text) {
    return std::string(ParseSegmentFile(text).status().message());
  };
  EXPECT_THAT(error("{"), HasSubstr("not valid JSON"));
  EXPECT_THAT(error("[]"), HasSubstr("\"videos\""));
  EXPECT_THAT(error(R"({"videos": [{"segments": []}]})"), HasSubstr("\"video\""));
  EXPECT_THAT(error(R"({"videos": [{"video": "a", "segments": []}, {"video": "a",
              "segments": []}]})"),
              HasSubstr("named twice"));
  EXPECT_THAT(error(R"({"videos": [{"video": "a"}]})"), HasSubstr("\"segments\""));
  const std::string one = R"({"videos": [{"video": "a", "segments": [{}]}]})";
  EXPECT_THAT(error(one), HasSubstr("videos[0] (a) segments[0]: \"label\""));
  EXPECT_THAT(error(R"({"videos": [{"video": "a", "segments": [{"label": "x",
              "start_seconds": 5, "end_seconds": 5}]}]})"),
              HasSubstr("start_seconds < end_seconds"));
  EXPECT_THAT(error(R"({"videos": [{"video": "a", "segments": [{"label": "x",
              "start_seconds": 0, "end_seconds": "1"}]}]})"),
              HasSubstr("\"end_seconds\" must be a number"));
  EXPECT_THAT(error(R"({"videos": [{"video": "a", "segments": [{"label": "x",
              "start_seconds": 0, "end_seconds": 1, "mean_score": 1.5}]}]})"),
              HasSubstr("[0, 1]"));
  EXPECT_THAT(error(R"({"videos": [{"video": "a", "duration_seconds": -1, "segments": []}]})"),
              HasSubstr("positive"));
}

class EvalSegmentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("vidclf_eval_segments_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  // RunEvalSegments' exit code, and what it printed.
  std::pair<int, std::string> Eval(const std::string& truth, const std::string& predicted) {
    EvalFlags flags;
    flags.segments = true;
    flags.json = true;
    flags.truth = truth;
    flags.predicted = predicted;
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    const int code = RunEvalSegments(flags);
    const std::string out = ::testing::internal::GetCapturedStdout();
    const std::string err = ::testing::internal::GetCapturedStderr();
    return {code, code == 0 ? out : err};
  }

  fs::path dir_;
};

TEST_F(EvalSegmentsTest, ScoresPredictionsAgainstTheTruth) {
  const std::string truth = Write("truth.json", R"({"videos": [
      {"video": "a.mp4", "duration_seconds": 20, "segments": [
        {"label": "fade_in", "start_seconds": 0, "end_seconds": 10},
        {"label": "zoom_in", "start_seconds": 10, "end_seconds": 20}]}]})");
  // Perfect, then one of two segments right and half the time wrong.
  const auto [perfect_code, perfect] = Eval(truth, truth);
  ASSERT_EQ(perfect_code, 0) << perfect;
  const nlohmann::json best = nlohmann::json::parse(perfect);
  for (const char* key : {"frame_accuracy", "edit", "f1@0.50", "map@0.7"}) {
    EXPECT_DOUBLE_EQ(best[key].get<double>(), 100) << key;
  }
  const std::string half = Write("half.json", R"({"videos": [
      {"video": "a.mp4", "segments": [
        {"label": "fade_in", "start_seconds": 0, "end_seconds": 10, "mean_score": 0.9},
        {"label": "fade_out", "start_seconds": 10, "end_seconds": 20, "mean_score": 0.8}]}]})");
  const auto [code, text] = Eval(truth, half);
  ASSERT_EQ(code, 0) << text;
  const nlohmann::json report = nlohmann::json::parse(text);
  EXPECT_DOUBLE_EQ(report["frame_accuracy"].get<double>(), 50);
  EXPECT_DOUBLE_EQ(report["edit"].get<double>(), 50);
  EXPECT_DOUBLE_EQ(report["f1@0.50"].get<double>(), 50);
  EXPECT_EQ(report["true_segments"], 2);
  EXPECT_EQ(report["predicted_segments"], 2);
}

TEST_F(EvalSegmentsTest, RefusesVideosInOneFileOnlyAndBrokenFiles) {
  const std::string truth =
      Write("truth.json", R"({"videos": [{"video": "a.mp4", "segments": []}]})");
  const std::string other =
      Write("other.json", R"({"videos": [{"video": "b.mp4", "segments": []}]})");
  auto [code, message] = Eval(truth, other);
  EXPECT_EQ(code, kExitUsage);
  EXPECT_THAT(message, HasSubstr("no video named a.mp4"));
  const std::string broken = Write("broken.json", "{\"videos\": 3}");
  std::tie(code, message) = Eval(truth, broken);
  EXPECT_EQ(code, kExitUsage);
  EXPECT_THAT(message, HasSubstr("broken.json"));
}

}  // namespace
}  // namespace vidclf::train
