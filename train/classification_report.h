// Classification metrics for an evaluated model: per-class precision, recall, F1 and support,
// accuracy, macro and support-weighted averages, and the multi-class Matthews correlation, all
// derived from a confusion matrix (rows true class, columns predicted class). The text layout
// follows scikit-learn's classification_report, and the conventions follow its zero_division=0.
#ifndef VIDCLF_TRAIN_CLASSIFICATION_REPORT_H_
#define VIDCLF_TRAIN_CLASSIFICATION_REPORT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vidclf::train {

struct ClassMetrics {
  std::string label;
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;  // Clips whose true class is this one.
};

// Per-class and averaged classification metrics from a confusion matrix.
struct ClassificationReport {
  std::vector<std::string> labels;
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]
  std::vector<ClassMetrics> classes;
  int64_t total = 0;
  double accuracy = 0;
  double macro_precision = 0, macro_recall = 0, macro_f1 = 0;
  double weighted_precision = 0, weighted_recall = 0, weighted_f1 = 0;  // weighted by support
  double mcc = 0;  // multi-class Matthews correlation (Gorodkin / sklearn form)
};

// INVALID_ARGUMENT when there are no labels, the matrix is not labels.size() square, a cell is
// negative, or the counts overflow int64.
absl::StatusOr<ClassificationReport> ReportFromConfusion(
    std::vector<std::string> labels, std::vector<std::vector<int64_t>> confusion);

// truth and predicted are class indices in [0, labels.size()); INVALID_ARGUMENT naming the bad
// index or a size mismatch.
absl::StatusOr<ClassificationReport> ReportFromPredictions(std::vector<std::string> labels,
                                                           const std::vector<int64_t>& truth,
                                                           const std::vector<int64_t>& predicted);

// The report as a plain-text table in scikit-learn's layout:
//
//   class         precision  recall    f1  support
//   CricketShot        1.00    0.82  0.90       49
//   ...
//
//   accuracy                         0.94      224
//   macro avg          0.95    0.94  0.94      224
//   weighted avg       0.95    0.94  0.94      224
//
// decimals is clamped to [0, 10].
std::string FormatReport(const ClassificationReport& report, int decimals = 2);

// The confusion matrix as an aligned text table with a "true \ predicted" corner.
std::string FormatConfusion(const ClassificationReport& report);

// Keys: labels, confusion, classes (objects with label, precision, recall, f1, support), total,
// accuracy, macro and weighted (objects with precision, recall, f1), mcc.
nlohmann::json ReportToJson(const ClassificationReport& report);

// Rebuilds a report from ReportToJson's output. Only labels and confusion are read; every metric
// is recomputed from them so a report cannot disagree with its own matrix. INVALID_ARGUMENT when
// those keys are missing or malformed.
absl::StatusOr<ClassificationReport> ReportFromJson(const nlohmann::json& json);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_CLASSIFICATION_REPORT_H_
