// vidclf-train eval: a run's classification report on a split of the cached embeddings.
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/strings/str_format.h"
#include "model/train/head_trainer.h"
#include "model/video_model.h"
#include "train/classification_report.h"
#include "train/commands.h"
#include "train/work_dir.h"

namespace vidclf::train {

namespace fs = std::filesystem;

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
  absl::StatusOr<EmbeddingCache> cache = OpenWorkCache(flags.work);
  absl::StatusOr<LoadedSplit> loaded =
      cache.ok() ? LoadSplit(*cache, *dataset, split) : absl::StatusOr<LoadedSplit>(cache.status());
  if (!loaded.ok()) {
    std::cerr << "vidclf-train eval: " << loaded.status().message() << "\n";
    return kExitFailed;
  }
  if (loaded->set.size() == 0) {
    std::cerr << "vidclf-train eval: no embedded " << flags.split << " clips\n";
    return kExitUsage;
  }
  // The run's own head, or the substitution --attention names when the bundle allows it.
  absl::StatusOr<model::TemporalHead*> head = (*model)->HeadFor(flags.attention);
  if (!head.ok()) {
    std::cerr << "vidclf-train eval: " << head.status().message() << "\n";
    return kExitUsage;
  }
  const auto start = std::chrono::steady_clock::now();
  const torch::Tensor predicted = model::Predict(**head, loaded->set).contiguous();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const torch::Tensor labels = loaded->set.labels.contiguous();
  const auto as_vector = [](const torch::Tensor& classes) {
    return std::vector<int64_t>(classes.data_ptr<int64_t>(),
                                classes.data_ptr<int64_t>() + classes.size(0));
  };
  absl::StatusOr<ClassificationReport> report =
      ReportFromPredictions(dataset->classes, as_vector(labels), as_vector(predicted));
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
