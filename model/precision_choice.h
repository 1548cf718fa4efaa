// What `--precision auto` runs a bundle's backbone in: the fastest precision the device runs whose
// accuracy cost the bundle records as acceptable, else fp32; and why, for the start-up log and
// vidclf_model_info.
#ifndef VIDCLF_MODEL_PRECISION_CHOICE_H_
#define VIDCLF_MODEL_PRECISION_CHOICE_H_

#include <torch/torch.h>

#include <string>

#include "model/inference_options.h"
#include "model/model_config.h"

namespace vidclf::model {

// The bar a lower precision's recorded evaluation must meet: its top-1 agreement with fp32 and the
// most accuracy it may lose, on the bundle's test split.
inline constexpr double kMinTop1Agreement = 0.99;
inline constexpr double kMaxAccuracyDrop = 0.005;

struct PrecisionChoice {
  Precision precision = Precision::kFp32;
  // Why auto chose it ("bf16: this CPU has bf16 instructions, and ..."); empty where the
  // precision was asked for by name.
  std::string reason;
};

// int8 where `device` is a CPU with VNNI, the bundle is `int8_calibrated` and its metrics record an
// int8 evaluation that meets the bar; else bf16 where `device` runs it (a GPU, or a CPU with bf16
// instructions) and the bundle records a bf16 evaluation that meets the bar; else fp32. The
// evaluations are `vidclf-train eval --backbone-precision bf16|int8`'s, written into the bundle by
// export (metrics.backbone_precision.bf16 and .int8).
PrecisionChoice ChoosePrecision(const ModelConfig& config, const torch::Device& device,
                                bool int8_calibrated);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_PRECISION_CHOICE_H_
