// vidclf-train: builds a model bundle from the project's own synthetic videos.
//
// No pretrained weights can be downloaded where vidclf is built, so the demo model is made here,
// reproducibly: encode a deterministic synthetic video set (real MPEG-4 files), decode and embed
// it through the serving pipeline with a seeded, randomly initialised ResNet18, train the GRU head
// on the cached embeddings, report held-out accuracy, and write REPO/<name>/<version>/.
// --backbone-archive embeds with torchvision weights instead (model/scripts/export_resnet18.py).
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "media/libav_settings.h"
#include "media/video_encoder.h"
#include "model/resnet18_archive.h"
#include "model/train/head_trainer.h"
#include "model/video_model.h"
#include "pipeline/video_pipeline.h"
#include "train/synthetic_videos.h"

// The command line: every field is a --flag with dashes for underscores.
struct TrainFlags {
  std::string output_repository;
  std::string name = "demo";
  std::string version = "1";
  int videos_per_class = 40;
  double test_fraction = 0.25;
  int num_frames = 16;
  int crop_size = 112;
  int resize_shorter_side = 128;
  std::string head = "gru";
  std::string attention = "softmax";
  int d_model = 512;
  int num_layers = 6;
  int epochs = 60;
  double learning_rate = 0;
  int seed = 7;
  std::string samples_dir;
  std::string backbone_archive;
};

void AddTrainFlags(CLI::App& app, TrainFlags* flags) {
  app.add_option("--output-repository", flags->output_repository,
                 "Model repository to write the bundle into.")
      ->required();
  app.add_option("--name", flags->name, "Model name.")->capture_default_str();
  app.add_option("--version", flags->version, "Model version.")->capture_default_str();
  app.add_option("--videos-per-class", flags->videos_per_class, "Synthetic videos per class.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--test-fraction", flags->test_fraction,
                 "Share of each class held out for the test accuracy.")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--num-frames", flags->num_frames, "Frames sampled per video.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--crop-size", flags->crop_size, "Side of the square frames the backbone sees.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--resize-shorter-side", flags->resize_shorter_side,
                 "Shorter side before the centre crop.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--head", flags->head, "Temporal head.")
      ->capture_default_str()
      ->check(CLI::IsMember({"gru", "transformer"}));
  app.add_option("--attention", flags->attention, "Transformer attention mechanism (see docs).")
      ->capture_default_str();
  app.add_option("--d-model", flags->d_model, "Transformer width.")->capture_default_str();
  app.add_option("--num-layers", flags->num_layers, "Transformer encoder layers.")
      ->capture_default_str();
  app.add_option("--epochs", flags->epochs, "Training epochs of the head.")->capture_default_str();
  app.add_option("--learning-rate", flags->learning_rate,
                 "Adam learning rate (0: 3e-3 for gru, 3e-4 for transformer).")
      ->capture_default_str();
  app.add_option("--seed", flags->seed,
                 "Seeds the videos, the backbone's weights and the training.")
      ->capture_default_str();
  app.add_option("--samples-dir", flags->samples_dir,
                 "If set, writes one held-out video per class here.");
  app.add_option("--backbone-archive", flags->backbone_archive,
                 "ResNet18 weights from model/scripts/export_resnet18.py to embed with (and ship "
                 "in backbone.pt) instead of seeded random ones.");
}

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

int Run(const TrainFlags& flags) {
  const std::string repository = flags.output_repository;
  if (repository.empty()) {
    std::cerr << "vidclf-train: --output-repository DIR is required\n";
    return 2;
  }
  const uint64_t seed = static_cast<uint64_t>(flags.seed);
  std::cout << vidclf::model::ConfigureTorchThreads(
                   static_cast<int>(std::thread::hardware_concurrency()))
            << std::endl;

  vidclf::model::ModelConfig config;
  config.name = flags.name;
  config.version = flags.version;
  config.labels = vidclf::train::SyntheticLabels();
  config.input.num_frames = flags.num_frames;
  config.input.crop_size = flags.crop_size;
  config.input.resize_shorter_side = flags.resize_shorter_side;
  config.head = flags.head;
  config.transformer.d_model = flags.d_model;
  config.transformer.num_layers = flags.num_layers;
  config.transformer.attention.type = flags.attention;
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
  const std::string backbone_archive = flags.backbone_archive;
  if (!backbone_archive.empty()) {
    if (auto status = vidclf::model::LoadResNet18Archive(backbone_archive, (*model)->backbone());
        !status.ok()) {
      std::cerr << "vidclf-train: " << status.message() << "\n";
      return 1;
    }
    std::cout << "backbone weights from " << backbone_archive << std::endl;
  }

  const int per_class = flags.videos_per_class;
  const int test_per_class = std::max(1, static_cast<int>(per_class * flags.test_fraction));
  const std::string samples_dir = flags.samples_dir;
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
      auto embedded = vidclf::pipeline::DecodeAndEmbed(
          **model, vidclf::pipeline::VideoSource::Bytes(*video), clip);
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
  training.epochs = flags.epochs;
  training.seed = seed;
  training.learning_rate = flags.learning_rate;
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
  CLI::App app("vidclf-train: builds a model bundle from the project's own synthetic videos.");
  TrainFlags flags;
  AddTrainFlags(app, &flags);
  CLI11_PARSE(app, argc, argv);
  vidclf::media::ConfigureLibav({});  // the allocation cap, before any thread decodes
  return Run(flags);
}
