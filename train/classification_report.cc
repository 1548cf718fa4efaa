#include "train/classification_report.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vidclf::train {
namespace {

// scikit-learn's zero_division=0: an undefined ratio counts as 0 rather than NaN.
double SafeRatio(double numerator, double denominator) {
  return denominator == 0 ? 0.0 : numerator / denominator;
}

double F1(double precision, double recall) {
  return SafeRatio(2 * precision * recall, precision + recall);
}

absl::Status ValidateIndex(const char* name, size_t position, int64_t index, size_t num_labels) {
  if (index < 0 || static_cast<size_t>(index) >= num_labels) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s[%d] = %d is outside [0, %d)", name, position, index, num_labels));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClassificationReport> ReportFromConfusion(
    std::vector<std::string> labels, std::vector<std::vector<int64_t>> confusion) {
  const size_t n = labels.size();
  if (n == 0) return absl::InvalidArgumentError("classification report needs at least one label");
  if (confusion.size() != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "confusion matrix is not square: %d rows for %d labels", confusion.size(), n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (confusion[i].size() != n) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "confusion matrix is not square: row %d (%s) has %d columns for %d labels", i, labels[i],
          confusion[i].size(), n));
    }
  }

  // Row sums are true counts (support), column sums predicted counts.
  std::vector<int64_t> true_count(n, 0), predicted_count(n, 0);
  int64_t total = 0, correct = 0;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const int64_t cell = confusion[i][j];
      if (cell < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("confusion matrix has a negative cell: [%d][%d] = %d", i, j, cell));
      }
      // total bounds every row and column sum, so checking it alone rules out overflow.
      if (cell > kMax - total) {
        return absl::InvalidArgumentError("confusion matrix counts overflow int64");
      }
      total += cell;
      true_count[i] += cell;
      predicted_count[j] += cell;
      if (i == j) correct += cell;
    }
  }

  ClassificationReport report;
  report.total = total;
  const auto s = static_cast<double>(total);
  report.accuracy = SafeRatio(static_cast<double>(correct), s);
  report.classes.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    ClassMetrics m;
    m.label = labels[k];
    m.support = true_count[k];
    const auto hits = static_cast<double>(confusion[k][k]);
    const auto support = static_cast<double>(m.support);
    m.precision = SafeRatio(hits, static_cast<double>(predicted_count[k]));
    m.recall = SafeRatio(hits, support);
    m.f1 = F1(m.precision, m.recall);
    report.macro_precision += m.precision;
    report.macro_recall += m.recall;
    report.macro_f1 += m.f1;
    report.weighted_precision += m.precision * support;
    report.weighted_recall += m.recall * support;
    report.weighted_f1 += m.f1 * support;
    report.classes.push_back(std::move(m));
  }
  // Macro averages include labels with no support, as scikit-learn does when given the labels.
  const auto num_labels = static_cast<double>(n);
  report.macro_precision /= num_labels;
  report.macro_recall /= num_labels;
  report.macro_f1 /= num_labels;
  report.weighted_precision = SafeRatio(report.weighted_precision, s);
  report.weighted_recall = SafeRatio(report.weighted_recall, s);
  report.weighted_f1 = SafeRatio(report.weighted_f1, s);

  // Doubles throughout: s^2 overflows int64 once s passes about 3e9.
  double sum_pt = 0, sum_pp = 0, sum_tt = 0;
  for (size_t k = 0; k < n; ++k) {
    const auto p = static_cast<double>(predicted_count[k]);
    const auto t = static_cast<double>(true_count[k]);
    sum_pt += p * t;
    sum_pp += p * p;
    sum_tt += t * t;
  }
  const double denominator = std::sqrt((s * s - sum_pp) * (s * s - sum_tt));
  report.mcc = SafeRatio(static_cast<double>(correct) * s - sum_pt, denominator);

  report.labels = std::move(labels);
  report.confusion = std::move(confusion);
  return report;
}

absl::StatusOr<ClassificationReport> ReportFromPredictions(std::vector<std::string> labels,
                                                           const std::vector<int64_t>& truth,
                                                           const std::vector<int64_t>& predicted) {
  if (truth.size() != predicted.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "size mismatch: %d true labels but %d predictions", truth.size(), predicted.size()));
  }
  const size_t n = labels.size();
  std::vector<std::vector<int64_t>> confusion(n, std::vector<int64_t>(n, 0));
  for (size_t i = 0; i < truth.size(); ++i) {
    if (absl::Status s = ValidateIndex("truth", i, truth[i], n); !s.ok()) return s;
    if (absl::Status s = ValidateIndex("predicted", i, predicted[i], n); !s.ok()) return s;
    ++confusion[truth[i]][predicted[i]];
  }
  return ReportFromConfusion(std::move(labels), std::move(confusion));
}

std::string FormatReport(const ClassificationReport& report, int decimals) {
  decimals = std::clamp(decimals, 0, 10);
  constexpr const char* kAverageRows[] = {"accuracy", "macro avg", "weighted avg"};
  size_t name_width = std::string("class").size();
  for (const char* row : kAverageRows) name_width = std::max(name_width, std::string(row).size());
  for (const ClassMetrics& m : report.classes) name_width = std::max(name_width, m.label.size());
  // Every ratio is in [0, 1], so "1.00" is as wide as a number gets.
  const int number_width = decimals == 0 ? 1 : decimals + 2;
  const int p_width = std::max<int>(number_width, 9);  // "precision"
  const int r_width = std::max<int>(number_width, 6);  // "recall"
  const int f_width = std::max<int>(number_width, 2);  // "f1"
  const int s_width =
      std::max(static_cast<int>(absl::StrCat(report.total).size()), 7);  // "support"
  const int w = static_cast<int>(name_width);

  auto row = [&](const std::string& name, double p, double r, double f, int64_t support) {
    return absl::StrFormat("%-*s  %*.*f  %*.*f  %*.*f  %*d\n", w, name, p_width, decimals, p,
                           r_width, decimals, r, f_width, decimals, f, s_width, support);
  };

  std::string out = absl::StrFormat("%-*s  %*s  %*s  %*s  %*s\n", w, "class", p_width, "precision",
                                    r_width, "recall", f_width, "f1", s_width, "support");
  for (const ClassMetrics& m : report.classes) {
    absl::StrAppend(&out, row(m.label, m.precision, m.recall, m.f1, m.support));
  }
  out += "\n";
  // Accuracy has no precision or recall, so only the f1 and support columns are filled.
  absl::StrAppendFormat(&out, "%-*s  %*s  %*s  %*.*f  %*d\n", w, kAverageRows[0], p_width, "",
                        r_width, "", f_width, decimals, report.accuracy, s_width, report.total);
  absl::StrAppend(&out, row(kAverageRows[1], report.macro_precision, report.macro_recall,
                            report.macro_f1, report.total));
  absl::StrAppend(&out, row(kAverageRows[2], report.weighted_precision, report.weighted_recall,
                            report.weighted_f1, report.total));
  return out;
}

std::string FormatConfusion(const ClassificationReport& report) {
  constexpr char kCorner[] = "true \\ predicted";
  const size_t n = report.labels.size();
  int name_width = static_cast<int>(sizeof(kCorner)) - 1;
  for (const std::string& label : report.labels) {
    name_width = std::max(name_width, static_cast<int>(label.size()));
  }
  std::vector<int> widths(n);
  for (size_t j = 0; j < n; ++j) {
    widths[j] = static_cast<int>(report.labels[j].size());
    for (size_t i = 0; i < report.confusion.size() && j < report.confusion[i].size(); ++i) {
      widths[j] =
          std::max(widths[j], static_cast<int>(absl::StrCat(report.confusion[i][j]).size()));
    }
  }

  std::string out = absl::StrFormat("%-*s", name_width, kCorner);
  for (size_t j = 0; j < n; ++j) {
    absl::StrAppendFormat(&out, "  %*s", widths[j], report.labels[j]);
  }
  out += "\n";
  for (size_t i = 0; i < n && i < report.confusion.size(); ++i) {
    absl::StrAppendFormat(&out, "%-*s", name_width, report.labels[i]);
    for (size_t j = 0; j < n && j < report.confusion[i].size(); ++j) {
      absl::StrAppendFormat(&out, "  %*d", widths[j], report.confusion[i][j]);
    }
    out += "\n";
  }
  return out;
}

nlohmann::json ReportToJson(const ClassificationReport& report) {
  nlohmann::json classes = nlohmann::json::array();
  for (const ClassMetrics& m : report.classes) {
    classes.push_back({{"label", m.label},
                       {"precision", m.precision},
                       {"recall", m.recall},
                       {"f1", m.f1},
                       {"support", m.support}});
  }
  return {
      {"labels", report.labels},
      {"confusion", report.confusion},
      {"classes", std::move(classes)},
      {"total", report.total},
      {"accuracy", report.accuracy},
      {"macro",
       {{"precision", report.macro_precision},
        {"recall", report.macro_recall},
        {"f1", report.macro_f1}}},
      {"weighted",
       {{"precision", report.weighted_precision},
        {"recall", report.weighted_recall},
        {"f1", report.weighted_f1}}},
      {"mcc", report.mcc},
  };
}

absl::StatusOr<ClassificationReport> ReportFromJson(const nlohmann::json& json) {
  std::vector<std::string> labels;
  std::vector<std::vector<int64_t>> confusion;
  try {
    labels = json.at("labels").get<std::vector<std::string>>();
    confusion = json.at("confusion").get<std::vector<std::vector<int64_t>>>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("classification report JSON needs labels and confusion: ", e.what()));
  }
  return ReportFromConfusion(std::move(labels), std::move(confusion));
}

}  // namespace vidclf::train
