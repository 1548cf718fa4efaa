// vidclf classify and vidclf upload: one video, sent whole (or named by URI) or in chunks as it is
// read, and the server's answer printed as a table or JSON.
#ifndef VIDCLF_CLIENT_CLASSIFY_COMMAND_H_
#define VIDCLF_CLIENT_CLASSIFY_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>

#include "client/connection.h"
#include "vidclf/v1/video_classifier.pb.h"

namespace vidclf::client {

struct ClassifyOptions {
  ConnectionOptions connection;
  // The front door: "vidclf" (Classify) or "v2" (ModelInfer); classify and bench only.
  std::string protocol = "vidclf";
  // Empty: the server's default model.
  std::string model;
  int top_k = 5;
  // Frames to sample (0: the model's), and how.
  int num_frames = 0;
  std::string sampling;
  double fps = 0;
  int stride_frames = 0;
  double start_seconds = 0;
  // Fast decoding, opt-in (SamplingOptions in the proto).
  bool snap_to_keyframes = false;
  bool skip_loop_filter = false;
  // Attention to run a transformer model with instead of its own, if its bundle allows.
  std::string attention;
  bool json = false;
  // Largest chunk `upload` sends, in KiB.
  int chunk_kib = 256;
};

// Adds the options shared by classify and upload (and the connection's) to `command`.
void AddClassifyOptions(CLI::App* command, ClassifyOptions* options);

// Reads the file at `path` into `bytes`; false, with a message on stderr, when it cannot.
bool ReadVideo(const std::string& path, std::string* bytes);

// The request's settings from `options`; the caller sets the source.
vidclf::v1::ClassifyRequest SettingsFrom(const ClassifyOptions& options);

// Classifies the file at `source`, or the URI (anything with "://") for the server to pull.
int RunClassify(const std::string& source, const ClassifyOptions& options);

// Sends `path` (or standard input, "-") in chunks as it is read, until it ends or the server has
// answered: a sampling with a frame count can be settled before the end.
int RunUpload(const std::string& path, const ClassifyOptions& options);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_CLASSIFY_COMMAND_H_
