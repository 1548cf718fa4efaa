// vidclf-train: builds a model bundle from the project's own synthetic videos.
//
// No pretrained weights can be downloaded where vidclf is built, so the demo model is made here,
// reproducibly: encode a deterministic synthetic video set (real MPEG-4 files), decode and embed
// it through the serving pipeline with a seeded, randomly initialised ResNet18, train the GRU head
// on the cached embeddings, report held-out accuracy, and write REPO/<name>/<version>/.
// --backbone-archive embeds with torchvision weights instead (model/scripts/export_resnet18.py).
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "common/command_line.h"
#include "media/video_encoder.h"
#include "model/resnet18_archive.h"
#include "model/train/head_trainer.h"
#include "model/video_model.h"
#include "pipeline/video_pipeline.h"
#include "train/synthetic_videos.h"

ABSL_FLAG(std::string, output_repository, "", "Model repository to write the bundle into.");
ABSL_FLAG(std::string, name, "demo", "Model name.");
ABSL_FLAG(std::string, version, "1", "Model version.");
ABSL_FLAG(int, videos_per_class, 40, "Synthetic videos per class.");
ABSL_FLAG(double, test_fraction, 0.25, "Share of each class held out for the test accuracy.");
ABSL_FLAG(int, num_frames, 16, "Frames sampled per video.");
ABSL_FLAG(int, crop_size, 112, "Side of the square frames the backbone sees.");
ABSL_FLAG(int, resize_shorter_side, 128, "Shorter side before the centre crop.");
ABSL_FLAG(std::string, head, "gru", "Temporal head: gru or transformer.");
ABSL_FLAG(std::string, attention, "softmax", "Transformer attention mechanism (see docs).");
ABSL_FLAG(int, d_model, 512, "Transformer width.");
ABSL_FLAG(int, num_layers, 6, "Transformer encoder layers.");
ABSL_FLAG(int, epochs, 60, "Training epochs of the head.");
ABSL_FLAG(double, learning_rate, 0, "Adam learning rate (0: 3e-3 for gru, 3e-4 for transformer).");
ABSL_FLAG(int, seed, 7, "Seeds the videos, the backbone's weights and the training.");
ABSL_FLAG(std::string, samples_dir, "", "If set, writes one held-out video per class here.");
ABSL_FLAG(std::string, backbone_archive, "",
          "ResNet18 weights from model/scripts/export_resnet18.py to embed with (and ship in "
          "backbone.pt) instead of seeded random ones.");

namespace {

using vidclf::model::EmbeddingSet;

struct Split {
  std::vector<torch::Tensor> embeddings;
  std::vector<int64_t> labels;

  EmbeddingSet ToSet() const {
    EmbeddingSet set;
    std::vector<int64_t> lengths;
    for (const torch::Tensor& e : embeddings) lengths.push_back(e.size(0));
    set.embeddings = torch::nn::utils::rnn::pad_sequence(embeddings, /*batch_first=*/true);
    set.lengths = torch::tensor(lengths, torch::kLong);
    set.labels = torch::tensor(labels, torch::kLong);
    return set;
  }
};

int Run() {
  const std::string repository = absl::GetFlag(FLAGS_output_repository);
  if (repository.empty()) {
    std::cerr << "vidclf-train: --output-repository DIR is required\n";
    return 2;
  }
  const uint64_t seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_seed));
  std::cout << vidclf::model::ConfigureTorchThreads(
                   static_cast<int>(std::thread::hardware_concurrency()))
            << std::endl;

  vidclf::model::ModelConfig config;
  config.name = absl::GetFlag(FLAGS_name);
  config.version = absl::GetFlag(FLAGS_version);
  config.labels = vidclf::train::SyntheticLabels();
  config.input.num_frames = absl::GetFlag(FLAGS_num_frames);
  config.input.crop_size = absl::GetFlag(FLAGS_crop_size);
  config.input.resize_shorter_side = absl::GetFlag(FLAGS_resize_shorter_side);
  config.head = absl::GetFlag(FLAGS_head);
  config.transformer.d_model = absl::GetFlag(FLAGS_d_model);
  config.transformer.num_layers = absl::GetFlag(FLAGS_num_layers);
  config.transformer.attention.type = absl::GetFlag(FLAGS_attention);
  // Positions the attention must accept: up to the 256 frames a request may ask the server to
  // sample (its default limit), plus a class token.
  config.transformer.attention.max_length = std::max(config.input.num_frames, 256) + 1;
  torch::manual_seed(seed);
  auto model = vidclf::model::VideoModel::Create(config);
  if (!model.ok()) {
    std::cerr << "vidclf-train: " << model.status().message() << "\n";
    return 1;
  }
  // Loaded before embedding: the head is trained on these weights' embeddings, and Save writes
  // them into the bundle's backbone.pt.
  const std::string backbone_archive = absl::GetFlag(FLAGS_backbone_archive);
  if (!backbone_archive.empty()) {
    if (auto status = vidclf::model::LoadResNet18Archive(backbone_archive, (*model)->backbone());
        !status.ok()) {
      std::cerr << "vidclf-train: " << status.message() << "\n";
      return 1;
    }
    std::cout << "backbone weights from " << backbone_archive << std::endl;
  }

  const int per_class = absl::GetFlag(FLAGS_videos_per_class);
  const int test_per_class =
      std::max(1, static_cast<int>(per_class * absl::GetFlag(FLAGS_test_fraction)));
  const std::string samples_dir = absl::GetFlag(FLAGS_samples_dir);
  if (!samples_dir.empty()) std::filesystem::create_directories(samples_dir);
  vidclf::media::ClipOptions clip;
  clip.sampling.num_frames = config.input.num_frames;
  Split train;
  Split test;
  std::cout << "embedding " << per_class * config.labels.size() << " synthetic videos" << std::endl;
  for (int label = 0; label < static_cast<int>(config.labels.size()); ++label) {
    for (int index = 0; index < per_class; ++index) {
      auto video = vidclf::media::EncodeVideo(vidclf::train::MakeSyntheticVideo(label, index, seed),
                                              vidclf::media::EncodeOptions{});
      if (!video.ok()) {
        std::cerr << "vidclf-train: " << video.status().message() << "\n";
        return 1;
      }
      auto embedded =
          vidclf::pipeline::DecodeAndEmbed(**model, vidclf::pipeline::VideoSource::Bytes(*video), clip);
      if (!embedded.ok()) {
        std::cerr << "vidclf-train: " << embedded.status().message() << "\n";
        return 1;
      }
      const bool held_out = index >= per_class - test_per_class;
      Split& split = held_out ? test : train;
      split.embeddings.push_back(embedded->embeddings);
      split.labels.push_back(label);
      if (held_out && index == per_class - 1 && !samples_dir.empty()) {
        std::ofstream(std::filesystem::path(samples_dir) / (config.labels[label] + ".mp4"),
                      std::ios::binary)
            << *video;
      }
    }
  }

  vidclf::model::HeadTrainingOptions training;
  training.epochs = absl::GetFlag(FLAGS_epochs);
  training.seed = seed;
  training.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  if (training.learning_rate <= 0) training.learning_rate = config.head == "gru" ? 3e-3 : 3e-4;
  training.on_epoch = [&training](int epoch, double loss) {
    if ((epoch + 1) % 10 == 0 || epoch + 1 == training.epochs) {
      std::cout << absl::StrFormat("epoch %3d  training loss %.4f", epoch + 1, loss) << std::endl;
    }
  };
  auto report = vidclf::model::TrainHead((*model)->head(), train.ToSet(), training);
  if (!report.ok()) {
    std::cerr << "vidclf-train: " << report.status().message() << "\n";
    return 1;
  }
  const double test_accuracy = vidclf::model::Accuracy((*model)->head(), test.ToSet());
  std::cout << absl::StrFormat(
                   "train accuracy %.3f, test accuracy %.3f on %d held-out videos "
                   "(chance %.3f)",
                   report->train_accuracy, test_accuracy, test.labels.size(),
                   1.0 / config.labels.size())
            << std::endl;

  (*model)->mutable_config().provenance = {
      {"made_by", "vidclf-train"},
      {"dataset", "synthetic: fades and hue rotations, MPEG-4 in MP4"},
      {"backbone_weights", backbone_archive.empty() ? std::string("random (seeded), not pretrained")
                                                    : "tensor archive " + backbone_archive},
      {"seed", seed},
      {"videos_per_class", per_class},
      {"train_videos", train.labels.size()},
      {"test_videos", test.labels.size()},
      {"epochs", training.epochs},
      {"learning_rate", training.learning_rate},
      {"train_accuracy", report->train_accuracy},
      {"test_accuracy", test_accuracy},
  };
  const std::string bundle = (std::filesystem::path(repository) / config.name / config.version);
  if (auto status = (*model)->Save(bundle); !status.ok()) {
    std::cerr << "vidclf-train: " << status.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << bundle << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  vidclf::ParseCommandLine(argc, argv, "vidclf-train --output-repository DIR [--name demo]");
  return Run();
}
