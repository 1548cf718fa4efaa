// The curves of a training run, written as a CSV (one row per epoch) and drawn as a PNG with two
// panels: loss, and accuracy / macro recall, with the kept epoch marked.
#ifndef VIDCLF_TRAIN_TRAINING_CURVES_H_
#define VIDCLF_TRAIN_TRAINING_CURVES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/train/head_trainer.h"

namespace vidclf::train {

absl::Status WriteCurvesCsv(const std::vector<model::EpochStats>& curves, const std::string& path);

// `title` goes above the panels. INTERNAL when cairo cannot write the file.
absl::Status DrawCurvesPng(const std::vector<model::EpochStats>& curves, int best_epoch,
                           const std::string& title, const std::string& path);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_TRAINING_CURVES_H_
