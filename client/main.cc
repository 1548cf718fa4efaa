// vidclf: the command-line client of vidclf-server.
//
//   vidclf classify FILE|URI [--server ADDR] [--model NAME] [--top-k K] [--num-frames N]
//                   [--sampling uniform|fps|window|all] [--fps R] [--stride-frames S]
//                   [--start-seconds T] [--snap-to-keyframes] [--skip-loop-filter]
//                   [--attention TYPE] [--json] [--protocol vidclf|v2]
//   vidclf classify --from-list LIST [--shard I/N] [--output FILE] [--segments]
//                   [the options of classify]
//   vidclf upload FILE|- [the options of classify] [--chunk-kib K]
//   vidclf stream SOURCE [--server ADDR] [--model NAME] [--attention TYPE] [--top-k K]
//                 [--emit-every-frames N | --emit-every-seconds S] [--embed-stride N]
//                 [--realtime] [--json] [--input-format F] [--input-option KEY=VALUE]...
//                 [--chunk-kib K] [--timeout-seconds T] [--protocol vidclf|v2]
//   vidclf watch URI [the options of stream but the feed's] [--max-reconnects N]
//   vidclf segments FILE|URI|- [--model NAME] [--fps R | --every-nth-frame N]
//                   [--window-frames W] [--hop-frames H] [--threshold S] [--hysteresis S]
//                   [--min-seconds T] [--max-gap-seconds T] [--upload] [--windows] [--json]
//                   [--webvtt FILE] [--plot FILE.png]
//   vidclf sources add ID URI [the options of watch] [--input-option K=V]... [--label K=V]...
//                  [--stall-timeout-seconds S] [--max-reconnects N] [--paused]
//   vidclf sources list [--filter F] | get ID | delete ID [--json]
//   vidclf sources update ID [--uri URI] [the options of add] [--pause | --resume]
//   vidclf sources subscribe [ID...] [--json]
//   vidclf models [NAME] [--json] [--protocol vidclf|v2]
//   vidclf health [--service NAME]
//   vidclf bench FILE... [--concurrency 1,2,4,8,16] [--requests N] [--warmup N] [--rate R]
//                [--metrics-url URL] [--json] [--protocol vidclf|v2]
//
// A URI (anything with "://") is sent for the server to pull, within the server's --allow-uri.
// `upload` streams the file (or standard input, "-") in chunks as it reads them, so the server
// decodes while the video arrives: `ffmpeg -i CAMERA -f mpegts - | vidclf upload - --sampling
// window --num-frames 16` classifies 16 frames of a live feed. `stream` follows a feed (a camera
// such as /dev/video0, a URL, a file, or "-") and prints the server's predictions until it ends
// or Ctrl-C stops it. `watch` has the server pull the source itself and follow it again when it
// drops; `sources` registers such sources with the server, which follows them whoever is
// connected, and `sources subscribe` hears them. `segments` prints the segments of a video as the
// server finds them (ClassifySegments).
// `--protocol v2` sends classify's, stream's, models' and bench's calls through the Open
// Inference Protocol (ModelInfer, ModelStreamInfer, RepositoryIndex and ModelMetadata) instead of
// vidclf.v1, to compare the two front doors.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "client/bench_command.h"
#include "client/classify_command.h"
#include "client/classify_list.h"
#include "client/models_command.h"
#include "client/segments_command.h"
#include "client/sources_command.h"
#include "client/stream_command.h"
#include "client/watch_command.h"
#include "common/version.h"
#include "media/libav_settings.h"

int main(int argc, char** argv) {
  using namespace vidclf::client;
  CLI::App app("vidclf: the command-line client of vidclf-server.");
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       vidclf::VersionText("vidclf", {{"FFmpeg", vidclf::media::LibavVersion()},
                                                      {"gRPC", grpc::Version()}}));

  ClassifyOptions classify_options;
  std::string source;
  std::string from_list;
  std::string shard = "0/1";
  std::string list_output;
  CLI::App* classify =
      app.add_subcommand("classify", "Classify a video file, or a URI for the server to pull.");
  CLI::Option* source_option =
      classify->add_option("source", source, "A video file, or a URI (anything with \"://\").");
  CLI::Option* from_list_option =
      classify
          ->add_option("--from-list", from_list,
                       "Classify the files and URIs a list names, one per line, and print a JSON "
                       "line for each (exit 3: some were refused for what they are; 1: a call "
                       "failed otherwise).")
          ->excludes(source_option);
  classify
      ->add_option("--shard", shard,
                   "With --from-list, take the I-th of N shards (entries I, I+N, ...), e.g. "
                   "$(JOB_COMPLETION_INDEX)/4 in a Kubernetes Indexed Job.")
      ->capture_default_str()
      ->needs(from_list_option);
  bool list_segments = false;
  classify
      ->add_flag("--segments", list_segments,
                 "With --from-list, write each video's segments (ClassifySegments with the "
                 "server's defaults) instead of its labels.")
      ->needs(from_list_option);
  classify
      ->add_option("--output", list_output,
                   "With --from-list, append the JSON lines to this file, and resume: videos "
                   "it already answers are not sent again.")
      ->needs(from_list_option);
  AddClassifyOptions(classify, &classify_options);
  AddProtocolOption(classify, &classify_options.protocol);

  ClassifyOptions upload_options;
  std::string upload_path;
  CLI::App* upload = app.add_subcommand(
      "upload", "Send a video in chunks as it is read (\"-\": standard input, a live feed).");
  upload->add_option("file", upload_path, "A video file, or - for standard input.")->required();
  AddClassifyOptions(upload, &upload_options);
  upload
      ->add_option("--chunk-kib", upload_options.chunk_kib,
                   "Largest chunk sent, in KiB; a pipe sends what has come.")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  StreamOptions stream_options;
  std::string stream_source;
  CLI::App* stream = app.add_subcommand(
      "stream", "Follow a live feed and print the server's predictions as they come.");
  stream
      ->add_option("source", stream_source,
                   "A camera (/dev/video0), a URL (rtsp://, http://, ...), a file, or - for "
                   "standard input.")
      ->required();
  AddStreamOptions(stream, &stream_options);
  AddProtocolOption(stream, &stream_options.protocol);

  WatchOptions watch_options;
  std::string watch_uri;
  CLI::App* watch = app.add_subcommand(
      "watch",
      "Ask the server to follow a live source it pulls itself (an allowed URI) and print its "
      "predictions, and each drop and reconnection, as they come.");
  watch->add_option("uri", watch_uri, "rtsp://, http://, file://, ... (the server's --allow-uri).")
      ->required();
  AddWatchOptions(watch, &watch_options);

  SegmentsOptions segments_options;
  std::string segments_source;
  CLI::App* segments = app.add_subcommand(
      "segments",
      "Find what happens when in a video: the server classifies windows of its frames and "
      "merges them into segments, printed as they are found.");
  segments
      ->add_option("source", segments_source,
                   "A video file, - for standard input, or a URI for the server to pull.")
      ->required();
  AddSegmentsOptions(segments, &segments_options);

  SourcesOptions sources_options;
  CLI::App* sources = AddSourcesCommand(app, &sources_options);

  ConnectionOptions models_connection;
  std::string model_name;
  bool models_json = false;
  CLI::App* models = app.add_subcommand("models", "List the server's models, or describe one.");
  models->add_option("name", model_name, "The model to describe (default: list them all).");
  models->add_flag("--json", models_json, "Print JSON instead of a table.");
  AddConnectionOptions(models, &models_connection);
  std::string models_protocol = "vidclf";
  AddProtocolOption(models, &models_protocol);

  ConnectionOptions health_connection;
  std::string health_service;
  bool health_wait = false;
  CLI::App* health = app.add_subcommand(
      "health", "Ask the server's gRPC health service; exit 0 only when it is SERVING.");
  health->add_option("--service", health_service,
                     "Service to ask about (vidclf.v1.VideoClassifier; default: the server).");
  health->add_flag("--wait", health_wait,
                   "Ask again until the server is SERVING, up to --timeout-seconds: for scripts "
                   "that have just started one.");
  AddConnectionOptions(health, &health_connection);

  BenchOptions bench_options;
  CLI::App* bench = app.add_subcommand(
      "bench", "Load a server with Classify calls over FILEs and report latency and throughput.");
  bench->add_option("files", bench_options.files, "Video files, sent round-robin.")->required();
  AddClassifyOptions(bench, &bench_options.classify);
  AddProtocolOption(bench, &bench_options.classify.protocol);
  bench
      ->add_option("--concurrency", bench_options.concurrency,
                   "Calls in flight at once, one level after another (comma-separated).")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  bench->add_option("--requests", bench_options.requests,
                    "Calls per level (default: 8 per concurrency, at least 16).");
  bench
      ->add_option("--warmup", bench_options.warmup,
                   "Calls sent, untimed, before the first level (over the files in turn).")
      ->check(CLI::NonNegativeNumber);
  bench->add_option("--rate", bench_options.rate,
                    "Start calls at this many per second instead of as soon as one ends.");
  bench->add_option("--metrics-url", bench_options.metrics_url,
                    "The server's /metrics, to report its memory, batch sizes, CPU time per "
                    "call and share of calls decoded on a GPU (http://host:port/metrics).");

  CLI11_PARSE(app, argc, argv);
  vidclf::media::ConfigureLibav({});  // the allocation cap, for the sources `stream` reads
  if (*classify && list_segments && classify_options.protocol != "vidclf") {
    std::cerr << "vidclf classify: --segments calls ClassifySegments, which only --protocol "
                 "vidclf has\n";
    return 2;
  }
  if (*classify && !from_list.empty())
    return RunClassifyList(from_list, shard, list_output, classify_options, list_segments);
  if (*classify) {
    if (source.empty()) {
      std::cerr << "vidclf classify: give a video, or --from-list LIST\n";
      return 2;
    }
    return RunClassify(source, classify_options);
  }
  if (*upload) return RunUpload(upload_path, upload_options);
  if (*stream) return RunStream(stream_source, stream_options);
  if (*watch) return RunWatch(watch_uri, watch_options);
  if (*segments) return RunSegments(segments_source, segments_options);
  if (*sources) return RunSources(*sources, sources_options);
  if (*models) return RunModels(model_name, models_json, models_connection, models_protocol);
  if (*health) return RunHealth(health_service, health_wait, health_connection);
  bench_options.json = bench_options.classify.json;
  return RunBench(bench_options);
}
