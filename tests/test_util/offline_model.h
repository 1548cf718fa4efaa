// A served model run offline, in the test's own process, on frames decoded by the same media
// code: what the server's answers are checked against.
#ifndef VIDCLF_TESTS_TEST_UTIL_OFFLINE_MODEL_H_
#define VIDCLF_TESTS_TEST_UTIL_OFFLINE_MODEL_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "model/video_model.h"

namespace vidclf::testing {

// The bundle in `bundle_dir` as the server runs it (exact arithmetic, channels-last); null, with
// the test failed, when it cannot be loaded.
std::unique_ptr<model::VideoModel> LoadServedModel(const std::string& bundle_dir);

// Every `stride`-th frame of the encoded `video`, decoded and embedded: [frames, 512].
torch::Tensor OfflineEmbeddings(const model::VideoModel& model, const std::string& video,
                                int stride = 1);

// The head's probabilities [labels] over rows [first, last] of `embeddings`, run from scratch.
torch::Tensor OfflineProbabilities(const model::VideoModel& model, const torch::Tensor& embeddings,
                                   int64_t first, int64_t last);

}  // namespace vidclf::testing

#endif  // VIDCLF_TESTS_TEST_UTIL_OFFLINE_MODEL_H_
