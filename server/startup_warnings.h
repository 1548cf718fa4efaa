// What an operator should hear at start-up about the ways a configuration exposes the server.
#ifndef VIDCLF_SERVER_STARTUP_WARNINGS_H_
#define VIDCLF_SERVER_STARTUP_WARNINGS_H_

#include <string>
#include <vector>

#include "server/server.h"

namespace vidclf {

// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost): only this machine reaches it.
bool IsLoopback(const std::string& host);

// One line per exposure the options leave: bearer tokens sent in plaintext on an address other
// machines reach, and /metrics left plaintext or open there while gRPC asks for TLS or tokens.
std::vector<std::string> ExposureWarnings(const ServerOptions& options);

}  // namespace vidclf

#endif  // VIDCLF_SERVER_STARTUP_WARNINGS_H_
