#include "model/precision_choice.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/onednn_resnet18.h"

namespace vidclf::model {

PrecisionChoice ChoosePrecision(const ModelConfig& config, const torch::Device& device) {
  if (device.is_cpu() && !OneDnnResNet18::Bf16Available()) {
    return {Precision::kFp32, "fp32: no bf16 instructions on this CPU (AVX-512 BF16 or AMX)"};
  }
  const nlohmann::json recorded =
      config.metrics.value("backbone_precision", nlohmann::json::object())
          .value("bf16", nlohmann::json::object());
  if (!recorded.contains("same_top1") || !recorded.contains("clips") ||
      !recorded.contains("accuracy") || !recorded.contains("accuracy_fp32")) {
    return {Precision::kFp32,
            "fp32: the bundle records no bf16 evaluation (vidclf-train eval "
            "--backbone-precision bf16, then export)"};
  }
  const int64_t same = recorded["same_top1"].get<int64_t>();
  const int64_t clips = recorded["clips"].get<int64_t>();
  const double drop = recorded["accuracy_fp32"].get<double>() - recorded["accuracy"].get<double>();
  const std::string evaluation = absl::StrFormat(
      "%d of %d clips the same top class as fp32, accuracy %+.2f points", same, clips, -100 * drop);
  if (clips <= 0 || static_cast<double>(same) < kMinTop1Agreement * static_cast<double>(clips) ||
      drop > kMaxAccuracyDrop) {
    return {Precision::kFp32,
            absl::StrFormat("fp32: the bundle's bf16 evaluation misses the bar (%s; at least "
                            "%.0f%% and at most %.1f points lost)",
                            evaluation, 100 * kMinTop1Agreement, 100 * kMaxAccuracyDrop)};
  }
  return {Precision::kBf16,
          absl::StrCat("bf16: ", device.is_cpu() ? "this CPU has bf16 instructions" : "a GPU",
                       ", and the bundle's bf16 evaluation meets the bar (", evaluation, ")")};
}

}  // namespace vidclf::model
