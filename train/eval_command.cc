// vidclf-train eval: a run's classification report on a split of the cached embeddings.
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/strings/str_format.h"
#include "model/video_model.h"
#include "train/classification_report.h"
#include "train/commands.h"
#include "train/work_dir.h"

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;

// The most probable class of each clip, with `attention` in place of the run's own mechanism
// when it names a substitution the bundle allows.
absl::StatusOr<std::vector<int64_t>> PredictClasses(const model::VideoModel& model,
                                                    const model::EmbeddingSet& set,
                                                    const std::string& attention) {
  std::vector<int64_t> predicted;
  constexpr int64_t kBatch = 64;
  for (int64_t begin = 0; begin < set.size(); begin += kBatch) {
    const int64_t end = std::min(begin + kBatch, set.size());
    const torch::Tensor lengths = set.lengths.slice(0, begin, end);
    const torch::Tensor embeddings =
        set.embeddings.slice(0, begin, end).slice(1, 0, lengths.max().item<int64_t>());
    absl::StatusOr<torch::Tensor> probabilities = model.Classify(embeddings, lengths, attention);
    if (!probabilities.ok()) return probabilities.status();
    const torch::Tensor classes = probabilities->argmax(1).contiguous();
    predicted.insert(predicted.end(), classes.data_ptr<int64_t>(),
                     classes.data_ptr<int64_t>() + classes.size(0));
  }
  return predicted;
}

}  // namespace

void AddEvalFlags(CLI::App* app, EvalFlags* flags, bool with_work) {
  if (with_work) {
    app->add_option("--work", flags->work, "Work directory that fit wrote the run into.")
        ->required();
    app->add_option("--run", flags->run, "Run to evaluate.")->required();
    app->add_option("--split", flags->split, "Clips to evaluate on.")
        ->capture_default_str()
        ->check(CLI::IsMember({"test", "validation", "train"}));
    app->add_option("--attention", flags->attention,
                    "Evaluate with this attention substitution (the bundle must allow it).");
  }
}

int RunEval(const EvalFlags& flags) {
  absl::StatusOr<Dataset> dataset = LoadWorkDataset(flags.work);
  if (!dataset.ok()) {
    std::cerr << "vidclf-train eval: " << dataset.status().message() << "\n";
    return kExitUsage;
  }
  model::ConfigureTorchThreads(static_cast<int>(std::thread::hardware_concurrency()));
  const std::string run_dir = RunDir(flags.work, flags.run);
  absl::StatusOr<std::unique_ptr<model::VideoModel>> model = model::VideoModel::Load(run_dir);
  if (!model.ok()) {
    std::cerr << "vidclf-train eval: " << model.status().message()
              << " (run `vidclf-train fit --run " << flags.run << "` first)\n";
    return kExitUsage;
  }
  const Split split = flags.split == "train"        ? Split::kTrain
                      : flags.split == "validation" ? Split::kValidation
                                                    : Split::kTest;
  absl::StatusOr<LoadedSplit> loaded = LoadSplit(flags.work, *dataset, split);
  if (!loaded.ok()) {
    std::cerr << "vidclf-train eval: " << loaded.status().message() << "\n";
    return kExitFailed;
  }
  if (loaded->set.size() == 0) {
    std::cerr << "vidclf-train eval: no embedded " << flags.split << " clips\n";
    return kExitUsage;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<int64_t>> predicted =
      PredictClasses(**model, loaded->set, flags.attention);
  if (!predicted.ok()) {
    std::cerr << "vidclf-train eval: " << predicted.status().message() << "\n";
    return kExitUsage;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const torch::Tensor labels = loaded->set.labels.contiguous();
  absl::StatusOr<ClassificationReport> report = ReportFromPredictions(
      dataset->classes,
      std::vector<int64_t>(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + labels.size(0)),
      *predicted);
  if (!report.ok()) {
    std::cerr << "vidclf-train eval: " << report.status().message() << "\n";
    return kExitFailed;
  }
  std::cout << absl::StrFormat("%s on %d %s clips%s\n\n", flags.run, report->total, flags.split,
                               flags.attention.empty() ? "" : ", attention " + flags.attention)
            << FormatReport(*report) << "\n"
            << FormatConfusion(*report) << "\n"
            << absl::StrFormat("MCC %.4f\n", report->mcc);
  nlohmann::json json = ReportToJson(*report);
  json["run"] = flags.run;
  json["split"] = flags.split;
  json["attention"] = flags.attention;
  json["classify_seconds"] = seconds;
  const std::string name =
      "eval-" + flags.split + (flags.attention.empty() ? "" : "-" + flags.attention) + ".json";
  if (auto status = WriteJsonFile(json, (fs::path(run_dir) / name).string()); !status.ok()) {
    std::cerr << "vidclf-train eval: " << status.message() << "\n";
    return kExitFailed;
  }
  return 0;
}

}  // namespace vidclf::train
