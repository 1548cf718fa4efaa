// vidclf-train: from a folder of labelled videos to a served model.
//
//   synth    writes the seeded synthetic benchmark (real video files, UCF101 layout)
//   embed    splits a data set and embeds every clip with the server's own decode path
//   fit      trains a GRU, transformer (any attention) or bag-of-frames head on the embeddings
//   eval     prints and saves the classification report of a run
//   calibrate  measures the int8 backbone's activation ranges and input means on training frames
//   export   writes a run into a model repository, with metrics and provenance
//   all      the steps in order
//
// No pretrained weights can be downloaded where vidclf is built, so the backbone is a seeded,
// randomly initialised ResNet18 unless --backbone-archive gives torchvision's weights
// (model/scripts/export_resnet18.py).
extern "C" {
#include <libavutil/log.h>
}
#include <torch/version.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "common/version.h"
#include "media/libav_settings.h"
#include "model/library_settings.h"
#include "train/commands.h"

namespace {

using namespace vidclf::train;  // NOLINT(google-build-using-namespace): the commands' flags

struct AllFlags {
  bool synthesize = false;
  SynthFlags synth;
  DataFlags data;
  EmbedFlags embed;
  FitFlags fit;
  EvalFlags eval;
  ExportFlags export_flags;
};

void AddAllFlags(CLI::App* app, AllFlags* flags) {
  app->add_flag("--synthesize", flags->synthesize,
                "First write the synthetic benchmark into --data (kept when it is already there) "
                "and use its split lists.");
  AddSynthFlags(app, &flags->synth, /*with_seed=*/false);
  AddDataFlags(app, &flags->data);
  app->add_option("--work", flags->embed.work, "Work directory (created).")->required();
  app->add_option("--seed", flags->embed.seed, "Seeds the data, split, backbone and training.")
      ->capture_default_str();
  AddEmbedFlags(app, &flags->embed, /*with_work=*/false);
  AddFitFlags(app, &flags->fit, /*with_work=*/false);
  AddEvalFlags(app, &flags->eval, /*with_work=*/false);
  AddExportFlags(app, &flags->export_flags, /*with_work=*/false);
}

int RunAll(AllFlags flags) {
  namespace fs = std::filesystem;
  const std::string work = flags.embed.work;
  flags.fit.work = flags.eval.work = flags.export_flags.work = work;
  flags.synth.seed = flags.fit.seed = flags.embed.seed;
  flags.eval.run = flags.export_flags.run = flags.fit.run;
  if (flags.synthesize) {
    const fs::path root = flags.data.data;
    if (!fs::exists(root / "splits" / "testlist01.txt")) {
      flags.synth.output = root.string();
      if (int code = RunSynth(flags.synth); code != 0) return code;
    } else {
      std::cout << "using the synthetic data set already in " << root.string() << std::endl;
    }
    // embed takes the split lists synth wrote beside the videos.
    flags.data.data = (root / "videos").string();
  }
  if (int code = RunEmbed(flags.data, flags.embed); code != 0) return code;
  if (int code = RunFit(flags.fit); code != 0) return code;
  if (int code = RunEval(flags.eval); code != 0) return code;
  return RunExport(flags.export_flags);
}

}  // namespace

int main(int argc, char** argv) {
  vidclf::model::RestartWithOpenBlasKernelsForThisCpu(argv);
  CLI::App app("vidclf-train: from a folder of labelled videos to a served model.");
  app.require_subcommand(1);
  app.set_version_flag(
      "--version",
      vidclf::VersionText("vidclf-train", {{"LibTorch", TORCH_VERSION},
                                           {"FFmpeg", vidclf::media::LibavVersion()}}));

  SynthFlags synth;
  CLI::App* synth_command =
      app.add_subcommand("synth", "Write the seeded synthetic benchmark (UCF101 layout).");
  synth_command
      ->add_option("--output", synth.output, "Directory to write videos/ and splits/ into.")
      ->required();
  AddSynthFlags(synth_command, &synth);

  DataFlags data;
  EmbedFlags embed;
  CLI::App* embed_command = app.add_subcommand(
      "embed", "Split a data set and embed every clip into the work directory (resumes).");
  AddDataFlags(embed_command, &data);
  AddEmbedFlags(embed_command, &embed);

  FitFlags fit;
  AddFitFlags(app.add_subcommand("fit", "Train a head on the cached embeddings."), &fit);
  AttentionFlags attention;
  AddAttentionFlags(
      app.add_subcommand("attention", "List the attention mechanisms with their parameters."),
      &attention);
  EvalFlags eval;
  AddEvalFlags(app.add_subcommand("eval", "Classification report of a run."), &eval);
  CalibrateFlags calibrate;
  AddCalibrateFlags(
      app.add_subcommand(
          "calibrate",
          "Measure the int8 backbone's activation ranges and input means on training frames."),
      &calibrate);
  ExportFlags export_flags;
  AddExportFlags(app.add_subcommand("export", "Write a run into a model repository."),
                 &export_flags);
  AllFlags all;
  CLI::App* all_command = app.add_subcommand(
      "all", "synth (with --synthesize), embed, fit, eval and export, in order.");
  AddAllFlags(all_command, &all);

  CLI11_PARSE(app, argc, argv);
  // The allocation cap, before any thread decodes; libx264 logs every encode at INFO otherwise.
  vidclf::media::LibavSettings libav;
  libav.log_level = AV_LOG_ERROR;
  vidclf::media::ConfigureLibav(libav);
  if (synth_command->parsed()) return RunSynth(synth);
  if (embed_command->parsed()) return RunEmbed(data, embed);
  if (app.got_subcommand("fit")) return RunFit(fit);
  if (app.got_subcommand("attention")) return RunAttention(attention);
  if (app.got_subcommand("eval")) return RunEval(eval);
  if (app.got_subcommand("calibrate")) return RunCalibrate(calibrate);
  if (app.got_subcommand("export")) return RunExport(export_flags);
  return RunAll(all);
}
