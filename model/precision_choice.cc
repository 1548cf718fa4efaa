#include "model/precision_choice.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/onednn_resnet18.h"

namespace vidclf::model {
namespace {

// Whether the evaluation of `name` (bf16, int8) that `config` records meets the bar; `why` says
// what it recorded, or that it recorded none.
bool MeetsTheBar(const ModelConfig& config, const std::string& name, std::string* why) {
  const nlohmann::json recorded =
      config.metrics.value("backbone_precision", nlohmann::json::object())
          .value(name, nlohmann::json::object());
  if (!recorded.contains("same_top1") || !recorded.contains("clips") ||
      !recorded.contains("accuracy") || !recorded.contains("accuracy_fp32")) {
    *why = absl::StrCat("the bundle records no ", name, " evaluation (vidclf-train eval ",
                        "--backbone-precision ", name, ", then export)");
    return false;
  }
  const int64_t same = recorded["same_top1"].get<int64_t>();
  const int64_t clips = recorded["clips"].get<int64_t>();
  const double drop = recorded["accuracy_fp32"].get<double>() - recorded["accuracy"].get<double>();
  const std::string evaluation = absl::StrFormat(
      "%d of %d clips the same top class as fp32, accuracy %+.2f points", same, clips, -100 * drop);
  if (clips <= 0 || static_cast<double>(same) < kMinTop1Agreement * static_cast<double>(clips) ||
      drop > kMaxAccuracyDrop) {
    *why = absl::StrFormat(
        "the bundle's %s evaluation misses the bar (%s; at least %.0f%% and at most %.1f points "
        "lost)",
        name, evaluation, 100 * kMinTop1Agreement, 100 * kMaxAccuracyDrop);
    return false;
  }
  *why = absl::StrCat("the bundle's ", name, " evaluation meets the bar (", evaluation, ")");
  return true;
}

}  // namespace

PrecisionChoice ChoosePrecision(const ModelConfig& config, const torch::Device& device,
                                bool int8_calibrated) {
  // int8 first where it runs: on the CPU that runs both, it took half bf16's time
  // (docs/backbone-benchmark.md).
  std::string int8_why;
  if (device.is_cpu()) {
    if (!OneDnnResNet18::Int8Available()) {
      int8_why = "no VNNI instructions on this CPU for int8";
    } else if (!int8_calibrated) {
      int8_why = "the bundle has no int8 calibration (vidclf-train calibrate, then export)";
    } else if (MeetsTheBar(config, "int8", &int8_why)) {
      return {Precision::kInt8, absl::StrCat("int8: this CPU has VNNI, and ", int8_why)};
    }
  }
  std::string bf16_why;
  if (device.is_cpu() && !OneDnnResNet18::Bf16Available()) {
    bf16_why = "no bf16 instructions on this CPU (AVX-512 BF16 or AMX)";
  } else if (MeetsTheBar(config, "bf16", &bf16_why)) {
    return {Precision::kBf16,
            absl::StrCat("bf16: ", device.is_cpu() ? "this CPU has bf16 instructions" : "a GPU",
                         ", and ", bf16_why)};
  }
  return {Precision::kFp32,
          absl::StrCat("fp32: ", bf16_why, int8_why.empty() ? "" : "; ", int8_why)};
}

}  // namespace vidclf::model
