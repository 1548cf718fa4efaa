// A served model's metadata as the ListModels and GetModel RPCs return it.
#ifndef VIDCLF_SERVER_SERVICE_MODEL_INFO_H_
#define VIDCLF_SERVER_SERVICE_MODEL_INFO_H_

#include <string>

#include "server/engine/model_repository.h"
#include "vidclf/v1/video_classifier.pb.h"

namespace vidclf::service {

vidclf::v1::ModelInfo ModelInfoOf(const engine::ModelRepository::Entry& entry,
                                  const std::string& default_model);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_MODEL_INFO_H_
