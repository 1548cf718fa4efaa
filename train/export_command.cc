// vidclf-train export: a run, with its test metrics and provenance, into a model repository.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "model/video_model.h"
#include "train/commands.h"
#include "train/work_dir.h"

#ifndef VIDCLF_CODE_VERSION
#define VIDCLF_CODE_VERSION "unknown"
#endif

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;

// One test clip per class, copied as SAMPLES/<class>.<ext>, for trying the served model. An MP4
// when the class has one, so that examples can name SAMPLES/<class>.mp4.
absl::Status CopySamples(const Dataset& dataset, const std::string& samples_dir) {
  std::error_code error;
  fs::create_directories(samples_dir, error);
  std::vector<Clip> clips = dataset.ClipsOf(Split::kTest);
  std::stable_partition(clips.begin(), clips.end(),
                        [](const Clip& clip) { return fs::path(clip.path).extension() == ".mp4"; });
  std::vector<bool> copied(dataset.classes.size(), false);
  for (const Clip& clip : clips) {
    if (copied[clip.label]) continue;
    const fs::path source = fs::path(dataset.root) / clip.path;
    const fs::path target =
        fs::path(samples_dir) / (dataset.classes[clip.label] + source.extension().string());
    fs::copy_file(source, target, fs::copy_options::overwrite_existing, error);
    if (error) {
      return absl::PermissionDeniedError(absl::StrCat("cannot copy ", source.string(), " to ",
                                                      target.string(), ": ", error.message()));
    }
    copied[clip.label] = true;
  }
  return absl::OkStatus();
}

}  // namespace

void AddExportFlags(CLI::App* app, ExportFlags* flags, bool with_work) {
  if (with_work) {
    app->add_option("--work", flags->work, "Work directory holding the run.")->required();
    app->add_option("--run", flags->run, "Run to export.")->required();
  }
  app->add_option("--output-repository", flags->output_repository,
                  "Model repository to write REPO/<name>/<version>/ into.")
      ->required();
  app->add_option("--name", flags->name, "Model name (default: the run's name).");
  app->add_option("--version", flags->version, "Model version.")->capture_default_str();
  app->add_option("--samples-dir", flags->samples_dir,
                  "If set, copies one test clip per class here, named after its class.");
}

int RunExport(const ExportFlags& flags) {
  absl::StatusOr<Dataset> dataset = LoadWorkDataset(flags.work);
  if (!dataset.ok()) {
    std::cerr << "vidclf-train export: " << dataset.status().message() << "\n";
    return kExitUsage;
  }
  const std::string run_dir = RunDir(flags.work, flags.run);
  absl::StatusOr<std::unique_ptr<model::VideoModel>> model = model::VideoModel::Load(run_dir);
  if (!model.ok()) {
    std::cerr << "vidclf-train export: " << model.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<nlohmann::json> metrics =
      ReadJsonFile((fs::path(run_dir) / "eval-test.json").string());
  if (!metrics.ok()) {
    std::cerr << "vidclf-train export: run " << flags.run
              << " has no test metrics; run `vidclf-train eval --work " << flags.work << " --run "
              << flags.run << "` first\n";
    return kExitUsage;
  }
  absl::StatusOr<nlohmann::json> fit = ReadJsonFile((fs::path(run_dir) / "fit.json").string());
  absl::StatusOr<nlohmann::json> embed =
      ReadJsonFile((fs::path(flags.work) / "embed.json").string());
  if (!fit.ok() || !embed.ok()) {
    std::cerr << "vidclf-train export: " << (fit.ok() ? embed.status() : fit.status()).message()
              << "\n";
    return kExitFailed;
  }
  model::ModelConfig& config = (*model)->mutable_config();
  config.name = flags.name.empty() ? flags.run : flags.name;
  config.version = flags.version;
  config.metrics = {{"split", "test"},
                    {"clips", (*metrics)["total"]},
                    {"accuracy", (*metrics)["accuracy"]},
                    {"macro_recall", (*metrics)["macro"]["recall"]},
                    {"macro_f1", (*metrics)["macro"]["f1"]},
                    {"weighted_f1", (*metrics)["weighted"]["f1"]},
                    {"mcc", (*metrics)["mcc"]},
                    {"classes", (*metrics)["classes"]}};
  std::error_code error;
  config.provenance = {
      {"made_by", "vidclf-train"},
      {"code_version", VIDCLF_CODE_VERSION},
      {"date", absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone())},
      {"data", fs::absolute(dataset->root, error).string()},
      {"split", dataset->split_source},
      {"clips",
       {{"train", dataset->ClipsOf(Split::kTrain).size()},
        {"validation", dataset->ClipsOf(Split::kValidation).size()},
        {"test", dataset->ClipsOf(Split::kTest).size()}}},
      {"embedding", *embed},
      {"training", *fit},
  };
  const fs::path bundle = fs::path(flags.output_repository) / config.name / config.version;
  if (fs::exists(bundle / "model.json")) {
    std::cerr << "vidclf-train export: " << bundle.string()
              << " already holds a model; give another --version (a served version is never "
                 "overwritten)\n";
    return kExitUsage;
  }
  if (auto status = (*model)->Save(bundle.string()); !status.ok()) {
    std::cerr << "vidclf-train export: " << status.message() << "\n";
    return kExitFailed;
  }
  if (!flags.samples_dir.empty()) {
    if (auto status = CopySamples(*dataset, flags.samples_dir); !status.ok()) {
      std::cerr << "vidclf-train export: " << status.message() << "\n";
      return kExitFailed;
    }
  }
  std::cout << "wrote " << bundle.string() << " (test accuracy "
            << config.metrics["accuracy"].get<double>() << ", macro recall "
            << config.metrics["macro_recall"].get<double>() << ")" << std::endl;
  return 0;
}

}  // namespace vidclf::train
