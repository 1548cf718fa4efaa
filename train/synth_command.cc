// vidclf-train synth: the seeded synthetic benchmark, written as real video files.
#include <iostream>

#include "train/commands.h"
#include "train/progress.h"
#include "train/synthetic_dataset.h"

namespace vidclf::train {

void AddSynthFlags(CLI::App* app, SynthFlags* flags, bool with_seed) {
  if (with_seed) {
    app->add_option("--seed", flags->seed, "Seeds every video: the same seed gives the same bytes.")
        ->capture_default_str();
  }
  app->add_option("--videos-per-class", flags->videos_per_class, "Videos of each class.")
      ->capture_default_str()
      ->check(CLI::Range(2, 100000));
  app->add_option("--synth-test-fraction", flags->test_fraction,
                  "Share of each class listed in testlist01.txt.")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.9));
  app->add_option("--min-frames", flags->min_frames, "Shortest video, in frames.")
      ->capture_default_str()
      ->check(CLI::Range(2, 100000));
  app->add_option("--max-frames", flags->max_frames, "Longest video, in frames.")
      ->capture_default_str()
      ->check(CLI::Range(2, 100000));
  if (!with_seed) return;  // `all` synthesizes clips only
  app->add_flag("--timeline", flags->timeline,
                "Write long videos of consecutive segments of the classes instead, with their "
                "true segments in truth.json (the format vidclf-train eval --segments reads).");
  app->add_option("--timelines", flags->timelines, "With --timeline: how many videos.")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  app->add_option("--timeline-seconds", flags->timeline_seconds,
                  "With --timeline: each video's length.")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 14400.0));
  app->add_option("--min-segment-seconds", flags->min_segment_seconds,
                  "With --timeline: shortest segment.")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  app->add_option("--max-segment-seconds", flags->max_segment_seconds,
                  "With --timeline: longest segment.")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
}

namespace {

int RunSynthTimelines(const SynthFlags& flags) {
  SyntheticTimelinesOptions options;
  options.output_dir = flags.output;
  options.seed = flags.seed;
  options.timelines = flags.timelines;
  options.timeline.duration_seconds = flags.timeline_seconds;
  options.timeline.min_segment_seconds = flags.min_segment_seconds;
  options.timeline.max_segment_seconds = flags.max_segment_seconds;
  if (auto status = CheckTimelineOptions(options.timeline); !status.ok()) {
    std::cerr << "vidclf-train synth: " << status.message() << "\n";
    return kExitUsage;
  }
  Progress progress("timelines", flags.timelines);
  absl::StatusOr<int64_t> bytes =
      WriteSyntheticTimelines(options, [&progress](int, int) { progress.Advance(); });
  progress.Finish();
  if (!bytes.ok()) {
    std::cerr << "vidclf-train synth: " << bytes.status().message() << "\n";
    return kExitFailed;
  }
  std::cout << "wrote " << flags.timelines << " timelines (" << *bytes / 1024 << " KiB) and "
            << "truth.json to " << flags.output << std::endl;
  return 0;
}

}  // namespace

int RunSynth(const SynthFlags& flags) {
  if (flags.timeline) return RunSynthTimelines(flags);
  if (flags.min_frames > flags.max_frames) {
    std::cerr << "vidclf-train synth: --min-frames must not exceed --max-frames\n";
    return kExitUsage;
  }
  SyntheticDatasetOptions options;
  options.output_dir = flags.output;
  options.seed = flags.seed;
  options.videos_per_class = flags.videos_per_class;
  options.test_fraction = flags.test_fraction;
  options.video.min_frames = flags.min_frames;
  options.video.max_frames = flags.max_frames;
  Progress progress("videos",
                    static_cast<int64_t>(flags.videos_per_class) * SyntheticLabels().size());
  absl::StatusOr<SyntheticDatasetSummary> summary =
      WriteSyntheticDataset(options, [&progress](int, int) { progress.Advance(); });
  progress.Finish();
  if (!summary.ok()) {
    std::cerr << "vidclf-train synth: " << summary.status().message() << "\n";
    return kExitFailed;
  }
  std::cout << "wrote " << summary->videos << " videos (" << summary->train_videos << " train, "
            << summary->test_videos << " test, " << summary->bytes / 1024 << " KiB) to "
            << flags.output << "/videos, split lists in " << flags.output << "/splits" << std::endl;
  return 0;
}

}  // namespace vidclf::train
