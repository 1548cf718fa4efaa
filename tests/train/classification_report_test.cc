#include "train/classification_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace vidclf::train {
namespace {

using Matrix = std::vector<std::vector<int64_t>>;

const std::vector<std::string> kSeedLabels = {"CricketShot", "PlayingCello", "Punch",
                                              "ShavingBeard", "TennisSwing"};

// The seed's GRU confusion matrix (rows true, columns predicted).
const Matrix kSeedConfusion = {
    {40, 0, 0, 0, 9}, {0, 43, 0, 1, 0}, {0, 0, 38, 1, 0}, {0, 0, 2, 41, 0}, {0, 0, 0, 0, 49}};

double Round2(double x) { return std::round(x * 100) / 100; }

std::vector<std::string> SplitText(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) parts.push_back(part);
  return parts;
}

std::vector<std::string> Tokens(const std::string& line) {
  std::vector<std::string> tokens;
  std::stringstream stream(line);
  std::string token;
  while (stream >> token) tokens.push_back(token);
  return tokens;
}

// The whitespace-separated tokens of the first line of text that starts with prefix.
std::vector<std::string> RowTokens(const std::string& text, const std::string& prefix) {
  for (const std::string& line : SplitText(text, '\n')) {
    if (line.rfind(prefix, 0) == 0) return Tokens(line);
  }
  return {};
}

TEST(ClassificationReportTest, GoldenGruConfusionMatchesSeedTable) {
  absl::StatusOr<ClassificationReport> report = ReportFromConfusion(kSeedLabels, kSeedConfusion);
  ASSERT_TRUE(report.ok()) << report.status();

  EXPECT_EQ(report->total, 224);
  EXPECT_NEAR(report->accuracy, 211.0 / 224.0, 1e-12);
  EXPECT_NEAR(report->accuracy, 0.94196, 1e-5);

  const std::vector<double> precision = {1, 1, 0.95, 0.95, 0.84};
  const std::vector<double> recall = {0.82, 0.98, 0.97, 0.95, 1};
  const std::vector<double> f1 = {0.90, 0.99, 0.96, 0.95, 0.92};
  const std::vector<int64_t> support = {49, 44, 39, 43, 49};
  ASSERT_EQ(report->classes.size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    SCOPED_TRACE(kSeedLabels[k]);
    EXPECT_EQ(report->classes[k].label, kSeedLabels[k]);
    EXPECT_NEAR(Round2(report->classes[k].precision), precision[k], 1e-9);
    EXPECT_NEAR(Round2(report->classes[k].recall), recall[k], 1e-9);
    EXPECT_NEAR(Round2(report->classes[k].f1), f1[k], 1e-9);
    EXPECT_EQ(report->classes[k].support, support[k]);
  }

  EXPECT_NEAR(Round2(report->macro_precision), 0.95, 1e-9);
  EXPECT_NEAR(Round2(report->macro_recall), 0.94, 1e-9);
  EXPECT_NEAR(Round2(report->macro_f1), 0.94, 1e-9);
  EXPECT_NEAR(Round2(report->weighted_precision), 0.95, 1e-9);
  EXPECT_NEAR(Round2(report->weighted_recall), 0.94, 1e-9);
  EXPECT_NEAR(Round2(report->weighted_f1), 0.94, 1e-9);
  EXPECT_NEAR(report->macro_f1, 0.94376, 1e-4);
  EXPECT_NEAR(report->weighted_f1, 0.94168, 1e-4);
  // Weighted recall is always the accuracy.
  EXPECT_NEAR(report->weighted_recall, report->accuracy, 1e-12);
  // c = 211, s = 224, p = (40, 43, 40, 43, 58), t = (49, 44, 39, 43, 49).
  EXPECT_NEAR(report->mcc, 0.929236, 1e-6);
}

TEST(ClassificationReportTest, FormatReportReproducesSeedTable) {
  absl::StatusOr<ClassificationReport> report = ReportFromConfusion(kSeedLabels, kSeedConfusion);
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string text = FormatReport(*report);

  using Row = std::vector<std::string>;
  EXPECT_EQ(RowTokens(text, "class"), (Row{"class", "precision", "recall", "f1", "support"}));
  EXPECT_EQ(RowTokens(text, "CricketShot"), (Row{"CricketShot", "1.00", "0.82", "0.90", "49"}));
  EXPECT_EQ(RowTokens(text, "PlayingCello"), (Row{"PlayingCello", "1.00", "0.98", "0.99", "44"}));
  EXPECT_EQ(RowTokens(text, "Punch"), (Row{"Punch", "0.95", "0.97", "0.96", "39"}));
  EXPECT_EQ(RowTokens(text, "ShavingBeard"), (Row{"ShavingBeard", "0.95", "0.95", "0.95", "43"}));
  EXPECT_EQ(RowTokens(text, "TennisSwing"), (Row{"TennisSwing", "0.84", "1.00", "0.92", "49"}));
  EXPECT_EQ(RowTokens(text, "accuracy"), (Row{"accuracy", "0.94", "224"}));
  EXPECT_EQ(RowTokens(text, "macro avg"), (Row{"macro", "avg", "0.95", "0.94", "0.94", "224"}));
  EXPECT_EQ(RowTokens(text, "weighted avg"),
            (Row{"weighted", "avg", "0.95", "0.94", "0.94", "224"}));

  // Aligned columns: every non-blank line has the same width and the numbers end in one column.
  const std::vector<std::string> lines = SplitText(text, '\n');
  const std::string& header = lines.front();
  for (const std::string& line : lines) {
    if (line.empty()) continue;
    EXPECT_EQ(line.size(), header.size()) << line;
  }
  const size_t recall_end = header.find("recall") + std::string("recall").size();
  const std::string cricket = lines[1];
  EXPECT_EQ(cricket.substr(recall_end - 4, 4), "0.82") << text;
}

TEST(ClassificationReportTest, FormatReportHonoursDecimals) {
  absl::StatusOr<ClassificationReport> report = ReportFromConfusion(kSeedLabels, kSeedConfusion);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(RowTokens(FormatReport(*report, 4), "CricketShot"),
            (std::vector<std::string>{"CricketShot", "1.0000", "0.8163", "0.8989", "49"}));
  EXPECT_EQ(RowTokens(FormatReport(*report, 4), "accuracy"),
            (std::vector<std::string>{"accuracy", "0.9420", "224"}));
}

TEST(ClassificationReportTest, ClassColumnIsAsWideAsTheLongestLabel) {
  const std::string long_label = "AVeryLongClassNameIndeed";
  absl::StatusOr<ClassificationReport> report =
      ReportFromConfusion({"a", long_label}, {{1, 0}, {0, 1}});
  ASSERT_TRUE(report.ok()) << report.status();
  const std::vector<std::string> lines = SplitText(FormatReport(*report), '\n');
  // "class" padded to the label's width, then the two-space column gap.
  EXPECT_EQ(lines[0].find("precision"), long_label.size() + 2);
  EXPECT_EQ(lines[2].rfind(long_label, 0), 0u);
}

TEST(ClassificationReportTest, FormatConfusionAlignsLabelsAndCounts) {
  absl::StatusOr<ClassificationReport> report =
      ReportFromConfusion({"cat", "dog"}, {{12345, 6}, {7, 8}});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(FormatConfusion(*report),
            "true \\ predicted    cat  dog\n"
            "cat               12345    6\n"
            "dog                   7    8\n");
}

TEST(ClassificationReportTest, ConstantPredictorHasZeroMccAndChanceMacroRecall) {
  // Every clip is predicted as class 0; all four classes are present.
  const std::vector<int64_t> truth = {0, 1, 2, 3, 0, 1, 2, 3, 3, 2};
  const std::vector<int64_t> predicted(truth.size(), 0);
  absl::StatusOr<ClassificationReport> report =
      ReportFromPredictions({"a", "b", "c", "d"}, truth, predicted);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->mcc, 0.0);
  EXPECT_EQ(report->macro_recall, 0.25);
  // Classes never predicted get precision 0 (zero_division=0), not NaN.
  for (size_t k = 1; k < 4; ++k) {
    EXPECT_EQ(report->classes[k].precision, 0.0);
    EXPECT_EQ(report->classes[k].f1, 0.0);
  }
}

TEST(ClassificationReportTest, PerfectPredictionHasMccOne) {
  const std::vector<int64_t> truth = {0, 1, 2, 2, 1, 0, 2};
  absl::StatusOr<ClassificationReport> report =
      ReportFromPredictions({"a", "b", "c"}, truth, truth);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_DOUBLE_EQ(report->mcc, 1.0);
  EXPECT_DOUBLE_EQ(report->accuracy, 1.0);
  EXPECT_DOUBLE_EQ(report->macro_f1, 1.0);
  EXPECT_DOUBLE_EQ(report->weighted_f1, 1.0);
}

TEST(ClassificationReportTest, MccMatchesHandComputed3x3) {
  // Confusion (rows true, columns predicted):
  //   [5 1 0]   t (row sums)    = 6, 6, 6
  //   [2 3 1]   p (column sums) = 7, 6, 5
  //   [0 2 4]   s = 18, c = 5 + 3 + 4 = 12
  // numerator   = c*s - sum p_k t_k = 216 - (42 + 36 + 30) = 108
  // denominator = sqrt((s^2 - sum p_k^2) (s^2 - sum t_k^2)) = sqrt((324 - 110)(324 - 108))
  //             = sqrt(214 * 216)
  // MCC = 108 / sqrt(46224) = 0.5023310...
  absl::StatusOr<ClassificationReport> report =
      ReportFromConfusion({"x", "y", "z"}, {{5, 1, 0}, {2, 3, 1}, {0, 2, 4}});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_DOUBLE_EQ(report->mcc, 108.0 / std::sqrt(214.0 * 216.0));
  EXPECT_NEAR(report->mcc, 0.502331, 1e-6);
  EXPECT_DOUBLE_EQ(report->accuracy, 12.0 / 18.0);
}

TEST(ClassificationReportTest, ClassWithoutSupportHasZeroRecallAndCountsInMacro) {
  // Class "c" never occurs but is predicted once; "b" occurs but is never predicted.
  absl::StatusOr<ClassificationReport> report =
      ReportFromConfusion({"a", "b", "c"}, {{2, 0, 1}, {1, 0, 0}, {0, 0, 0}});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->classes[2].support, 0);
  EXPECT_EQ(report->classes[2].recall, 0.0);
  EXPECT_EQ(report->classes[2].precision, 0.0);
  EXPECT_EQ(report->classes[1].precision, 0.0);
  EXPECT_EQ(report->classes[1].recall, 0.0);
  // Macro averages run over all three labels: recall (2/3 + 0 + 0) / 3.
  EXPECT_DOUBLE_EQ(report->macro_recall, (2.0 / 3.0) / 3.0);
}

TEST(ClassificationReportTest, PredictionsBuildTheConfusionMatrix) {
  absl::StatusOr<ClassificationReport> report =
      ReportFromPredictions({"a", "b"}, {0, 0, 1, 1, 1}, {0, 1, 1, 1, 0});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->confusion, (Matrix{{1, 1}, {1, 2}}));
  EXPECT_EQ(report->total, 5);
}

TEST(ClassificationReportTest, RejectsNonSquareMatrix) {
  absl::StatusOr<ClassificationReport> rows = ReportFromConfusion({"a", "b"}, {{1, 0}});
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rows.status().message().find("not square"), std::string::npos) << rows.status();

  absl::StatusOr<ClassificationReport> columns =
      ReportFromConfusion({"a", "b"}, {{1, 0}, {0, 1, 2}});
  EXPECT_EQ(columns.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(columns.status().message().find("row 1"), std::string::npos) << columns.status();
}

TEST(ClassificationReportTest, RejectsNegativeCellAndEmptyLabels) {
  absl::StatusOr<ClassificationReport> negative =
      ReportFromConfusion({"a", "b"}, {{1, 0}, {-3, 1}});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.status().message().find("negative"), std::string::npos) << negative.status();
  EXPECT_NE(negative.status().message().find("[1][0]"), std::string::npos) << negative.status();

  EXPECT_EQ(ReportFromConfusion({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClassificationReportTest, RejectsLabelOutOfRange) {
  absl::StatusOr<ClassificationReport> truth =
      ReportFromPredictions({"a", "b"}, {0, 2, 1}, {0, 1, 1});
  EXPECT_EQ(truth.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(truth.status().message().find("truth[1] = 2"), std::string::npos) << truth.status();

  absl::StatusOr<ClassificationReport> predicted =
      ReportFromPredictions({"a", "b"}, {0, 1, 1}, {0, 1, -1});
  EXPECT_EQ(predicted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(predicted.status().message().find("predicted[2] = -1"), std::string::npos)
      << predicted.status();
}

TEST(ClassificationReportTest, RejectsSizeMismatch) {
  absl::StatusOr<ClassificationReport> report =
      ReportFromPredictions({"a", "b"}, {0, 1, 1}, {0, 1});
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(report.status().message().find("size mismatch"), std::string::npos) << report.status();
}

TEST(ClassificationReportTest, JsonRoundTripKeepsKeysAndValues) {
  absl::StatusOr<ClassificationReport> report = ReportFromConfusion(kSeedLabels, kSeedConfusion);
  ASSERT_TRUE(report.ok()) << report.status();
  const nlohmann::json json = ReportToJson(*report);

  for (const char* key :
       {"labels", "confusion", "classes", "accuracy", "macro", "weighted", "mcc", "total"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  for (const char* average : {"macro", "weighted"}) {
    for (const char* key : {"precision", "recall", "f1"}) {
      EXPECT_TRUE(json[average].contains(key)) << average << "." << key;
    }
  }
  ASSERT_EQ(json["classes"].size(), 5u);
  for (const char* key : {"label", "precision", "recall", "f1", "support"}) {
    EXPECT_TRUE(json["classes"][0].contains(key)) << key;
  }
  EXPECT_EQ(json["classes"][0]["label"], "CricketShot");
  EXPECT_EQ(json["classes"][0]["support"], 49);
  EXPECT_EQ(json["total"], 224);
  EXPECT_DOUBLE_EQ(json["macro"]["f1"].get<double>(), report->macro_f1);

  // Through text and back, as a report file would travel.
  absl::StatusOr<ClassificationReport> back = ReportFromJson(nlohmann::json::parse(json.dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->labels, report->labels);
  EXPECT_EQ(back->confusion, report->confusion);
  EXPECT_EQ(back->total, report->total);
  EXPECT_DOUBLE_EQ(back->accuracy, report->accuracy);
  EXPECT_DOUBLE_EQ(back->weighted_f1, report->weighted_f1);
  EXPECT_DOUBLE_EQ(back->mcc, report->mcc);
  EXPECT_EQ(ReportToJson(*back), json);
}

TEST(ClassificationReportTest, ReportFromJsonRejectsMalformedInput) {
  EXPECT_EQ(ReportFromJson(nlohmann::json{{"labels", {"a"}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReportFromJson(nlohmann::json{{"labels", {"a"}}, {"confusion", "x"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReportFromJson(nlohmann::json::array()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vidclf::train
