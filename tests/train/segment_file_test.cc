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
using ::testing::AllOf;
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
  EXPECT_THAT(error("{"), HasSubstr("line 1 is not a JSON object"));
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

TEST(SegmentFileTest, ReadsTheJsonLinesTheClientWrites) {
  // `vidclf classify --from-list LIST --segments`: a video per line, named by its source.
  absl::StatusOr<std::vector<VideoSegments>> listed = ParseSegmentFile(
      "{\"source\": \"clips/b.mp4\", \"code\": \"OK\", \"segments\": [{\"label\": \"zoom_in\", "
      "\"start_seconds\": 5, \"end_seconds\": 9, \"mean_score\": 0.8, \"peak_score\": 0.9}, "
      "{\"label\": \"fade_in\", \"start_seconds\": 1, \"end_seconds\": 4}], \"frames_seen\": 10}\n"
      "\n{\"source\": \"clips/c.mp4\", \"code\": \"OK\", \"segments\": []}\n");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].video, "clips/b.mp4");
  ASSERT_EQ((*listed)[0].segments.size(), 2u);
  EXPECT_EQ((*listed)[0].segments[0].label, "fade_in");  // sorted by start
  EXPECT_EQ((*listed)[0].segments[1].mean_score, 0.8);
  // `vidclf segments VIDEO --json`: a segment per line, windows between them, no video name.
  absl::StatusOr<std::vector<VideoSegments>> printed = ParseSegmentFile(
      "{\"window\": {\"first_frame\": 0, \"last_frame\": 15, \"top_k\": []}}\n"
      "{\"label\": \"fade_in\", \"start_seconds\": 0.5, \"end_seconds\": 3.25, "
      "\"mean_score\": 0.7, \"peak_score\": 0.9}\n"
      "{\"label\": \"zoom_in\", \"start_seconds\": 4, \"end_seconds\": 6}\n");
  ASSERT_TRUE(printed.ok()) << printed.status();
  ASSERT_EQ(printed->size(), 1u);
  EXPECT_EQ((*printed)[0].video, "");
  EXPECT_EQ((*printed)[0].segments.size(), 2u);
}

TEST(SegmentFileTest, SaysWhatItExpectedOfLinesItCannotRead) {
  auto message = [](const std::string& text) {
    return std::string(ParseSegmentFile(text).status().message());
  };
  EXPECT_THAT(
      message("label,start,end\nfade_in,0,1\n"),
      AllOf(HasSubstr("line 1 is not a JSON object"), HasSubstr("{\"videos\": [...]}"),
            HasSubstr("classify --from-list LIST --segments"), HasSubstr("segments VIDEO --json")));
  EXPECT_THAT(message("{\"source\": \"a.mp4\", \"code\": \"NOT_FOUND\", \"error\": \"gone\"}\n"),
              AllOf(HasSubstr("line 1 (a.mp4) has no segments"), HasSubstr("NOT_FOUND")));
  EXPECT_THAT(message("{\"source\": \"a.mp4\", \"segments\": []}\n"
                      "{\"label\": \"x\", \"start_seconds\": 0, \"end_seconds\": 1}\n"),
              HasSubstr("line 2 has no \"source\""));
  EXPECT_THAT(message("{\"label\": \"x\", \"start_seconds\": 2, \"end_seconds\": 1}\n"),
              HasSubstr("line 1: needs 0 <= start_seconds < end_seconds"));
  EXPECT_THAT(message("\n"), HasSubstr("no segments"));
}

TEST_F(EvalSegmentsTest, ScoresWhatTheClientWrote) {
  const std::string truth = Write("truth.json", R"({"videos": [
      {"video": "a.mp4", "duration_seconds": 20, "segments": [
        {"label": "fade_in", "start_seconds": 0, "end_seconds": 10}]}]})");
  const std::string printed = Write(
      "printed.jsonl", "{\"label\": \"fade_in\", \"start_seconds\": 0, \"end_seconds\": 10}\n");
  auto [code, text] = Eval(truth, printed);
  ASSERT_EQ(code, 0) << text;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(text)["frame_accuracy"].get<double>(), 100);
  // A list's sources are paths: the one whose file name is the truth's video is that video.
  const std::string listed =
      Write("listed.jsonl",
            "{\"source\": \"timelines/a.mp4\", \"code\": \"OK\", \"segments\": "
            "[{\"label\": \"fade_in\", \"start_seconds\": 0, \"end_seconds\": 10}]}\n");
  std::tie(code, text) = Eval(truth, listed);
  ASSERT_EQ(code, 0) << text;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(text)["frame_accuracy"].get<double>(), 100);
  // One video's printed segments cannot stand for a truth of two.
  const std::string two = Write("two.json", R"({"videos": [
      {"video": "a.mp4", "segments": []}, {"video": "b.mp4", "segments": []}]})");
  std::tie(code, text) = Eval(two, printed);
  EXPECT_EQ(code, kExitUsage);
  EXPECT_THAT(text, HasSubstr("classify --from-list LIST --segments"));
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
