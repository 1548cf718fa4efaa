#include "client/segments_command.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "client/classify_command.h"
#include "client/segments_plot.h"
#include "client/signal_watcher.h"
#include "common/json_text.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::client {
namespace {

using vidclf::v1::ClassifySegmentsResponse;
using vidclf::v1::SegmentEvent;

// "01:02:03.456", as WebVTT times its cues.
std::string CueTime(double seconds) {
  const auto millis = static_cast<int64_t>(std::llround(std::max(0.0, seconds) * 1000));
  return absl::StrFormat("%02d:%02d:%02d.%03d", millis / 3600000, millis / 60000 % 60,
                         millis / 1000 % 60, millis % 1000);
}

nlohmann::json JsonOf(const vidclf::v1::SegmentWindow& window) {
  nlohmann::json labels = nlohmann::json::array();
  for (const vidclf::v1::LabelScore& label : window.top_k()) {
    labels.push_back({{"label", label.label()}, {"score", label.score()}});
  }
  return {{"window",
           {{"first_frame", window.first_frame()},
            {"last_frame", window.last_frame()},
            {"first_seconds", window.first_seconds()},
            {"last_seconds", window.last_seconds()},
            {"top_k", labels}}}};
}

// Prints what a message brings, as it comes: its windows when asked, and its finished segments.
class SegmentPrinter {
 public:
  explicit SegmentPrinter(const SegmentsOptions& options) : options_(options) {}

  void Print(const ClassifySegmentsResponse& response) {
    if (options_.windows) {
      for (const vidclf::v1::SegmentWindow& window : response.windows()) {
        if (options_.json) {
          std::cout << JsonText(JsonOf(window)) << std::endl;
          continue;
        }
        std::string line =
            absl::StrFormat("window %8.2f %8.2f ", window.first_seconds(), window.last_seconds());
        for (const vidclf::v1::LabelScore& label : window.top_k()) {
          absl::StrAppendFormat(&line, " %s %.3f", label.label(), label.score());
        }
        std::cout << line << std::endl;
      }
    }
    for (const SegmentEvent& event : response.events()) {
      if (event.kind() != SegmentEvent::SEGMENT_END) continue;
      segments_.push_back(event);
      if (options_.json) {
        std::cout << JsonText(SegmentJson(event)) << std::endl;
        continue;
      }
      if (segments_.size() == 1) {
        std::cout << absl::StrFormat("%-24s  %9s  %9s  %5s  %5s", "label", "start (s)", "end (s)",
                                     "mean", "peak")
                  << std::endl;
      }
      std::cout << absl::StrFormat("%-24s  %9.2f  %9.2f  %.3f  %.3f", event.label(),
                                   event.start_seconds(), event.end_seconds(), event.mean_score(),
                                   event.peak_score())
                << std::endl;
    }
    windows_ += response.windows_size();
    if (!options_.plot.empty()) {
      kept_windows_.insert(kept_windows_.end(), response.windows().begin(),
                           response.windows().end());
    }
    frames_seen_ = response.frames_seen();
    frames_embedded_ = response.frames_embedded();
  }

  const std::vector<SegmentEvent>& segments() const { return segments_; }
  // Every window, when a plot is asked for.
  const std::vector<vidclf::v1::SegmentWindow>& windows() const { return kept_windows_; }
  std::string Summary(double seconds) const {
    return absl::StrFormat("%d segments, %d windows; %d frames decoded, %d embedded; %.1f s",
                           segments_.size(), windows_, frames_seen_, frames_embedded_, seconds);
  }

 private:
  const SegmentsOptions& options_;
  std::vector<SegmentEvent> segments_;
  std::vector<vidclf::v1::SegmentWindow> kept_windows_;
  int64_t windows_ = 0;
  uint64_t frames_seen_ = 0;
  uint64_t frames_embedded_ = 0;
};

// Sends `fd`'s bytes in chunks after the settings while the answers are read; false when
// reading the input failed (the call is then cancelled).
bool SendChunks(int fd, const SegmentsOptions& options, grpc::ClientContext& context,
                grpc::ClientReaderWriter<vidclf::v1::ClassifySegmentsUploadRequest,
                                         ClassifySegmentsResponse>& call) {
  vidclf::v1::ClassifySegmentsUploadRequest message;
  *message.mutable_settings() = SegmentsSettingsFrom(options);
  if (!call.Write(message)) return true;  // the server has answered
  message.clear_settings();
  std::string chunk(static_cast<size_t>(std::max(1, options.chunk_kib)) << 10, '\0');
  while (true) {
    const ssize_t count = read(fd, chunk.data(), chunk.size());
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) {
      context.TryCancel();
      return false;
    }
    if (count == 0) break;
    message.set_chunk(chunk.data(), static_cast<size_t>(count));
    if (!call.Write(message)) return true;
  }
  call.WritesDone();
  return true;
}

}  // namespace

void AddSegmentsOptions(CLI::App* command, SegmentsOptions* options) {
  AddConnectionOptions(command, &options->connection);
  command->get_option("--timeout-seconds")
      ->description("Deadline of the call; 0: none, a long video takes as long as it takes.");
  command->add_option("--model", options->model, "Model to use (default: the server's default).");
  command->add_option("--attention", options->attention,
                      "Attention to run a transformer model with instead of its own, if its "
                      "bundle allows.");
  command->add_option("--top-k", options->top_k, "Ranked labels per window.")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  CLI::Option* fps =
      command->add_option("--fps", options->fps,
                          "Frames sampled per second of video (default: the server's, 4, or a "
                          "segmentation model's own rate).");
  command
      ->add_option("--every-nth-frame", options->every_nth_frame,
                   "Or sample every n-th decoded frame.")
      ->excludes(fps);
  command->add_option("--window-frames", options->window_frames,
                      "Sampled frames per window (default: the model's num_frames).");
  command->add_option("--hop-frames", options->hop_frames,
                      "Sampled frames from one window's start to the next's; divides the window "
                      "(default: half of it).");
  command
      ->add_option("--threshold", options->threshold,
                   "A segment starts where its label's score reaches this...")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command
      ->add_option("--hysteresis", options->hysteresis,
                   "...and goes on while the score stays above the threshold less this.")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--min-seconds", options->min_seconds, "Shorter segments are dropped.")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  command
      ->add_option("--max-gap-seconds", options->max_gap_seconds,
                   "Dips of the score up to this long are bridged.")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  command->add_flag("--upload", options->upload,
                    "Send the file in chunks as it is read, decoded as they arrive (its container "
                    "must stream: MPEG-TS, Matroska, fragmented MP4, ...).");
  command->add_option("--chunk-kib", options->chunk_kib, "Largest chunk --upload sends, in KiB.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--windows", options->windows, "Print each window's labels too.");
  command->add_flag("--json", options->json,
                    "Print one JSON object per segment (and window) and line.");
  command->add_option("--webvtt", options->webvtt,
                      "Also write the segments to this file as a WebVTT track.");
  command->add_option("--plot", options->plot,
                      "Also draw the timeline into this PNG: the --top-k labels' window scores "
                      "over time, and the segments as bars.");
}

vidclf::v1::ClassifySegmentsRequest SegmentsSettingsFrom(const SegmentsOptions& options) {
  vidclf::v1::ClassifySegmentsRequest request;
  request.set_model(options.model);
  request.set_attention(options.attention);
  request.set_top_k(static_cast<uint32_t>(std::max(0, options.top_k)));
  // Out-of-range numbers go to the server as they are, which says what is wrong with them.
  if (options.fps) request.set_frames_per_second(*options.fps);
  if (options.every_nth_frame) {
    request.set_every_nth_frame(static_cast<uint32_t>(std::max(0, *options.every_nth_frame)));
  }
  if (options.window_frames) {
    request.set_window_frames(static_cast<uint32_t>(std::max(0, *options.window_frames)));
  }
  if (options.hop_frames) {
    request.set_hop_frames(static_cast<uint32_t>(std::max(0, *options.hop_frames)));
  }
  vidclf::v1::SegmentEventOptions* segments = request.mutable_segments();
  segments->set_threshold(options.threshold);
  segments->set_hysteresis(options.hysteresis);
  segments->set_min_seconds(options.min_seconds);
  segments->set_max_gap_seconds(options.max_gap_seconds);
  segments->set_events_only(!options.windows && options.plot.empty());
  return request;
}

nlohmann::json SegmentJson(const SegmentEvent& segment) {
  return {{"label", segment.label()},
          {"start_seconds", segment.start_seconds()},
          {"end_seconds", segment.end_seconds()},
          {"mean_score", segment.mean_score()},
          {"peak_score", segment.peak_score()}};
}

grpc::Status ReadSegments(vidclf::v1::VideoClassifier::Stub& stub, grpc::ClientContext& context,
                          const vidclf::v1::ClassifySegmentsRequest& request,
                          const std::function<void(const ClassifySegmentsResponse&)>& on_response) {
  auto call = stub.ClassifySegments(&context, request);
  ClassifySegmentsResponse response;
  while (call->Read(&response)) on_response(response);
  return call->Finish();
}

std::string WebVttOf(std::vector<SegmentEvent> segments) {
  std::stable_sort(segments.begin(), segments.end(),
                   [](const SegmentEvent& a, const SegmentEvent& b) {
                     return a.start_seconds() < b.start_seconds();
                   });
  std::string vtt = "WEBVTT\n";
  int cue = 0;
  for (const SegmentEvent& segment : segments) {
    // A cue's text may hold neither "-->" nor a line break, and '&' and '<' start markup.
    const std::string label = absl::StrReplaceAll(
        segment.label(), {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\n", " "}, {"\r", " "}});
    absl::StrAppendFormat(&vtt, "\n%d\n%s --> %s\n%s (mean %.2f, peak %.2f)\n", ++cue,
                          CueTime(segment.start_seconds()), CueTime(segment.end_seconds()), label,
                          segment.mean_score(), segment.peak_score());
  }
  return vtt;
}

int RunSegments(const std::string& source, const SegmentsOptions& options) {
  const bool uri = absl::StrContains(source, "://");
  const bool upload = !uri && (options.upload || source == "-");
  vidclf::v1::ClassifySegmentsRequest request = SegmentsSettingsFrom(options);
  int fd = -1;
  if (uri) {
    request.set_uri(source);
  } else if (upload) {
    fd = source == "-" ? STDIN_FILENO : open(source.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      std::cerr << "vidclf: cannot read " << source << ": " << std::strerror(errno) << "\n";
      return 1;
    }
  } else if (!ReadVideo(source, request.mutable_video())) {
    return 1;
  }
  const absl::Cleanup close_file = [fd] {
    if (fd > STDIN_FILENO) close(fd);
  };
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(options.connection);
  if (!channel.ok()) return FailBeforeCalling(channel.status());
  auto stub = vidclf::v1::VideoClassifier::NewStub(*channel);
  grpc::ClientContext context;
  if (options.connection.timeout_seconds > 0) SetDeadline(context, options.connection);
  SignalWatcher signals([&] {
    std::cerr << "vidclf: interrupted; cancelling the call\n";
    context.TryCancel();
  });
  const auto start = std::chrono::steady_clock::now();

  SegmentPrinter printer(options);
  grpc::Status status;
  bool input_read = true;
  if (upload) {
    auto call = stub->ClassifySegmentsUpload(&context);
    std::thread sender([&] { input_read = SendChunks(fd, options, context, *call); });
    ClassifySegmentsResponse response;
    while (call->Read(&response)) printer.Print(response);
    sender.join();
    status = call->Finish();
  } else {
    status = ReadSegments(*stub, context, request,
                          [&](const ClassifySegmentsResponse& message) { printer.Print(message); });
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status.ok()) (options.json ? std::cerr : std::cout) << printer.Summary(seconds) << "\n";
  if (!input_read) {
    std::cerr << "vidclf: reading " << source << " failed\n";
    return 1;
  }
  if (signals.signalled()) return kInterruptedExit;
  if (!status.ok()) return Fail(status, options.connection);
  if (!options.plot.empty()) {
#ifdef VIDCLF_PLOTS
    const absl::Status drawn = DrawSegmentsPng(
        printer.windows(), printer.segments(),
        absl::StrCat(source, options.model.empty() ? "" : " (" + options.model + ")"),
        options.plot);
    if (!drawn.ok()) {
      std::cerr << "vidclf: " << drawn.message() << "\n";
      return 1;
    }
#else
    std::cerr << "vidclf: this vidclf was built without plots (VIDCLF_TRAINING=OFF leaves out "
                 "cairo)\n";
    return 1;
#endif
  }
  if (!options.webvtt.empty()) {
    std::ofstream vtt(options.webvtt, std::ios::binary | std::ios::trunc);
    vtt << WebVttOf(printer.segments());
    if (!vtt.flush()) {
      std::cerr << "vidclf: cannot write " << options.webvtt << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace vidclf::client
