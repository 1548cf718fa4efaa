#include "tests/test_util/offline_model.h"

#include <gtest/gtest.h>

#include <utility>

#include "media/clip_decoder.h"
#include "pipeline/video_pipeline.h"

namespace vidclf::testing {

std::unique_ptr<model::VideoModel> LoadServedModel(const std::string& bundle_dir) {
  model::InferenceOptions inference = model::InferenceOptions::Exact();
  inference.channels_last = true;
  auto model = model::VideoModel::Load(bundle_dir, inference);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

torch::Tensor OfflineEmbeddings(const model::VideoModel& model, const std::string& video,
                                int stride) {
  media::ClipOptions clip;
  clip.sampling.strategy = media::SamplingStrategy::kAll;
  clip.sampling.num_frames = 1000;
  auto embedded =
      pipeline::DecodeAndEmbed(model, media::VideoSource::Bytes(video), std::move(clip));
  EXPECT_TRUE(embedded.ok()) << embedded.status();
  if (!embedded.ok()) return torch::Tensor();
  return embedded->embeddings.slice(0, 0, embedded->embeddings.size(0), stride);
}

torch::Tensor OfflineProbabilities(const model::VideoModel& model, const torch::Tensor& embeddings,
                                   int64_t first, int64_t last) {
  const torch::Tensor window = embeddings.slice(0, first, last + 1).unsqueeze(0);
  auto probabilities = model.Classify(window, torch::full({1}, window.size(1), torch::kLong));
  EXPECT_TRUE(probabilities.ok()) << probabilities.status();
  return probabilities.ok() ? probabilities->squeeze(0) : torch::Tensor();
}

}  // namespace vidclf::testing
