// vidclf sources: the cameras and streams a server pulls on its own (the Sources API), added,
// listed, described, changed, deleted, and heard as they go.
#ifndef VIDCLF_CLIENT_SOURCES_COMMAND_H_
#define VIDCLF_CLIENT_SOURCES_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "client/follow_options.h"

namespace vidclf::client {

struct SourcesOptions {
  // add: the config (model, attention, top_k, emit policy, embed stride, segment events); every
  // subcommand: the connection and --json.
  FollowOptions follow;
  std::string id;
  std::string uri;
  // KEY=VALUE, repeatable.
  std::vector<std::string> input_options;
  std::vector<std::string> labels;
  double stall_timeout_seconds = 0;
  int max_reconnects = 0;
  bool paused = false;
  // add: frames handed on at the pace of their media times.
  bool realtime = false;
  // update: --pause or --resume.
  bool pause = false;
  bool resume = false;
  // list.
  std::string filter;
  // subscribe: ids, none for all; exit after `count` updates (0: never).
  std::vector<std::string> ids;
  int count = 0;
};

// Adds `vidclf sources` and its subcommands to `app`; returns the command.
CLI::App* AddSourcesCommand(CLI::App& app, SourcesOptions* options);

// Runs the subcommand of `sources` that was given. Exit codes: 0 done, 1 the server refused or
// failed, 2 bad options, 130 interrupted (subscribe).
int RunSources(const CLI::App& sources, const SourcesOptions& options);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_SOURCES_COMMAND_H_
