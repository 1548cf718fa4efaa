// Small model bundles with seeded random weights, for tests that serve them.
#ifndef VIDCLF_TESTS_TEST_UTIL_TEST_MODELS_H_
#define VIDCLF_TESTS_TEST_UTIL_TEST_MODELS_H_

#include <string>

#include "model/model_config.h"

namespace vidclf::testing {

// A GRU model "tiny" version 1 with labels alpha, beta, gamma, sampling 4 frames at 64x64.
model::ModelConfig TinyConfig();

// The same with a one-layer transformer head (d_model 32, 2 heads) running `attention`.
model::ModelConfig TinyTransformerConfig(const std::string& name, const std::string& attention);

// Builds `config` with weights drawn after torch::manual_seed(seed) and saves it as a bundle in
// `bundle_dir`; fails the current test on error.
void SaveModel(const model::ModelConfig& config, const std::string& bundle_dir, int seed = 1);

}  // namespace vidclf::testing

#endif  // VIDCLF_TESTS_TEST_UTIL_TEST_MODELS_H_
