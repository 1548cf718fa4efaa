// Floating-point operations of a transformer head's attention for one clip: the quantity of seed
// 000's FLOPs column (attention blocks only, at evaluation), counted from the shapes rather than
// measured, so that it is the same on every machine.
//
// Counted: the inner mechanism of every layer and head (a multiply-add is 2 FLOPs; exponentials,
// comparisons and the projections W_Q, W_K, W_V, W_O, which every mechanism shares, are not).
// Each mechanism counts its own per layer and head (AttentionSpec::flops_per_head, beside its
// code).
#ifndef VIDCLF_TRAIN_ATTENTION_COST_H_
#define VIDCLF_TRAIN_ATTENTION_COST_H_

#include <cstdint>

#include "model/model_config.h"

namespace vidclf::train {

// FLOPs of the attention of `config`'s transformer head over `frames` frames (plus the class
// token when it pools with one); 0 for a GRU head.
double AttentionFlopsPerClip(const model::ModelConfig& config, int64_t frames);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_ATTENTION_COST_H_
