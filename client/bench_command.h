// vidclf bench: a load generator in the manner of Triton's perf_analyzer. It sends Classify calls
// (or ModelInfer ones, --protocol v2) over a set of files at each of several concurrencies (closed
// loop), or at a fixed request rate (open loop, latency counted from each call's scheduled start),
// and reports latency percentiles, clips/s and frames/s, and what the server's /metrics said about
// its memory and batches.
#ifndef VIDCLF_CLIENT_BENCH_COMMAND_H_
#define VIDCLF_CLIENT_BENCH_COMMAND_H_

#include <string>
#include <vector>

#include "client/classify_command.h"

namespace vidclf::client {

struct BenchOptions {
  // The calls' settings and the connection.
  ClassifyOptions classify;
  std::vector<std::string> files;
  // Calls in flight at once, one level after another.
  std::vector<int> concurrency = {1, 2, 4, 8, 16};
  // Calls per level; 0: 8 per concurrency, at least 16.
  int requests = 0;
  // Calls sent one at a time before the first level, untimed, over the files in turn, so that
  // the timed calls find the channel and the server as a client that keeps its channel does.
  int warmup = 0;
  // When > 0, calls start at this rate (per second) instead of as soon as one ends; concurrency
  // then caps the calls in flight.
  double rate = 0;
  // The server's /metrics page (http://host:port/metrics); empty: not read.
  std::string metrics_url;
  bool json = false;
};

int RunBench(const BenchOptions& options);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_BENCH_COMMAND_H_
