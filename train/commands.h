// The subcommands of vidclf-train and their flags. Each step reads and writes a work directory
// (see work_dir.h), so the steps can run one by one, be resumed, or run together with `all`.
#ifndef VIDCLF_TRAIN_COMMANDS_H_
#define VIDCLF_TRAIN_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace vidclf::train {

// Exit codes: 0 done, 1 the step failed, 2 bad flags or input.
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct SynthFlags {
  std::string output;
  uint64_t seed = 1;
  int videos_per_class = 40;
  double test_fraction = 0.25;
  int min_frames = 24;
  int max_frames = 48;
  // Long videos of consecutive segments instead (synthetic_timeline.h).
  bool timeline = false;
  int timelines = 4;
  double timeline_seconds = 600;
  double min_segment_seconds = 4;
  double max_segment_seconds = 16;
};

// Where the clips are and how they are split: a data set in the UCF101 layout (data), or
// timelines by their truth files, one per split (truth: training; timeline_dataset.h).
struct DataFlags {
  std::string data;
  std::string truth;
  std::string validation_truth;
  std::string test_truth;
  std::string train_list;
  std::string test_list;
  std::string class_index;
  double test_fraction = 0.25;
  double validation_fraction = 0.15;
};

struct EmbedFlags {
  std::string work;
  uint64_t seed = 1;  // the split and the backbone's random weights
  int num_frames = 16;
  std::string sampling = "uniform";
  double frames_per_second = 0;  // 0: 1 for clips, 4 for timelines
  int crop_size = 112;
  int resize_shorter_side = 128;
  int jobs = 0;  // 0: one per core
  std::string backbone_archive;
  std::string backbone_kernels = "eager";  // or "fused", "winograd": as vidclf-server's flag
};

struct FitFlags {
  std::string work;
  std::string run;
  uint64_t seed = 1;
  std::string head = "gru";
  std::string attention = "softmax";
  std::vector<std::string> attention_substitutions;
  std::string pooling = "mean";
  bool positional_encoding = true;
  int64_t d_model = 128;
  int64_t num_heads = 4;
  int64_t num_layers = 2;
  int64_t ffn_size = 256;
  double dropout = 0.1;
  std::vector<std::string> attention_parameters;  // KEY=VALUE
  int64_t gru_hidden_size = 32;
  int64_t gru_num_layers = 2;
  double gru_input_dropout = 0.0;
  int epochs = 60;
  int batch_size = 16;
  double learning_rate = 0;  // 0: 3e-3 for a GRU, 1e-3 for a transformer
  double gradient_clip_norm = 1.0;
  int patience = 15;
  bool class_weighted_loss = true;
  // "frames", "differences" (model::ModelConfig::frame_differences) or "auto": differences for
  // timelines, frames for clips.
  std::string head_input = "auto";
  // Timelines only (trained per frame): see model::HeadTrainingOptions.
  int64_t window_frames = 64;
  double smoothing_weight = 0.15;
};

// The attention mechanisms fit can train, as their registry describes them.
struct AttentionFlags {
  std::string format = "markdown";  // or "json"
};

struct EvalFlags {
  std::string work;
  std::string run;
  std::string split = "test";
  std::string attention;  // a substitution the bundle allows; empty: its own
  // Classify each clip as a live stream would: frame by frame through VideoModel::StreamStep, the
  // prediction after its last frame.
  bool stream = false;
  // With stream: "int8" steps through int8 weights (model::StepWeights::kInt8) and
  // compares the probabilities with float32 steps'.
  std::string stream_step_weights = "float32";
  // Other than fp32: the split's clips are embedded again by the backbone in this precision (as
  // vidclf-server --precision runs it on this machine; int8 by the work directory's calibration),
  // and the predictions compared with fp32's.
  std::string backbone_precision = "fp32";
  // Instead of a run: compares predicted segments with the true ones (segment_file.h).
  bool segments = false;
  std::string truth;
  std::string predicted;
  double frame_step_seconds = 0.25;
  bool json = false;
};

struct CalibrateFlags {
  std::string work;
  int64_t frames = 512;
};

struct ExportFlags {
  std::string work;
  std::string run;
  std::string output_repository;
  std::string name;
  std::string version = "1";
  std::string samples_dir;
};

// `with_seed` false when another group already registers --seed (vidclf-train all, which makes
// clips only: no timeline flags).
void AddSynthFlags(CLI::App* app, SynthFlags* flags, bool with_seed = true);
void AddDataFlags(CLI::App* app, DataFlags* flags);
// `with_work` false when another group already registers --work and --seed (vidclf-train all).
void AddEmbedFlags(CLI::App* app, EmbedFlags* flags, bool with_work = true);
void AddFitFlags(CLI::App* app, FitFlags* flags, bool with_work = true);
void AddAttentionFlags(CLI::App* app, AttentionFlags* flags);
// Without `with_work`, registers nothing: `all` evaluates its run on the test split.
void AddEvalFlags(CLI::App* app, EvalFlags* flags, bool with_work = true);
void AddCalibrateFlags(CLI::App* app, CalibrateFlags* flags);
void AddExportFlags(CLI::App* app, ExportFlags* flags, bool with_work = true);

int RunSynth(const SynthFlags& flags);
int RunEmbed(const DataFlags& data, const EmbedFlags& flags);
int RunFit(const FitFlags& flags);
int RunAttention(const AttentionFlags& flags);
int RunEval(const EvalFlags& flags);
int RunEvalSegments(const EvalFlags& flags);
int RunCalibrate(const CalibrateFlags& flags);
int RunExport(const ExportFlags& flags);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_COMMANDS_H_
