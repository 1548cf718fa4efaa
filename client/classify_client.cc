#include "client/classify_client.h"

#include <utility>

#include "client/inference_messages.h"

namespace vidclf::client {

ClassifyClient::ClassifyClient(const std::shared_ptr<grpc::Channel>& channel,
                               const std::string& protocol)
    : v2_(protocol == "v2") {
  if (v2_) {
    inference_ = inference::GRPCInferenceService::NewStub(channel);
  } else {
    classifier_ = vidclf::v1::VideoClassifier::NewStub(channel);
  }
}

ClassifyClient::Prepared ClassifyClient::Prepare(vidclf::v1::ClassifyRequest request) const {
  Prepared prepared;
  if (v2_) {
    prepared.infer = ToModelInfer(request);
  } else {
    prepared.classify = std::move(request);
  }
  return prepared;
}

grpc::Status ClassifyClient::Classify(grpc::ClientContext* context, const Prepared& call,
                                      vidclf::v1::ClassifyResponse* response) const {
  if (!v2_) return classifier_->Classify(context, call.classify, response);
  inference::ModelInferResponse infer;
  const grpc::Status status = inference_->ModelInfer(context, call.infer, &infer);
  if (status.ok()) *response = FromModelInfer(infer);
  return status;
}

}  // namespace vidclf::client
