// vidclf models and vidclf health: what a server serves, and whether it serves.
#ifndef VIDCLF_CLIENT_MODELS_COMMAND_H_
#define VIDCLF_CLIENT_MODELS_COMMAND_H_

#include <string>

#include "client/connection.h"

namespace vidclf::client {

// Lists the server's models as a table, or, with `name`, describes that one; `json` prints the
// messages as JSON instead. `protocol` "v2" asks the Open Inference Protocol's RepositoryIndex
// and ModelMetadata (one JSON object per model) instead of vidclf.v1's.
int RunModels(const std::string& name, bool json, const ConnectionOptions& connection,
              const std::string& protocol);

// Prints the health service's answer for `service` ("": the server as a whole); exit code 0 only
// for SERVING.
int RunHealth(const std::string& service, bool wait, const ConnectionOptions& connection);

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_MODELS_COMMAND_H_
