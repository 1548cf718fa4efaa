// The two front doors a whole-video call can go through (--protocol): vidclf.v1's Classify, or
// the Open Inference Protocol's ModelInfer, whose answer is read back into a ClassifyResponse so
// that the subcommands print and count both alike.
#ifndef VIDCLF_CLIENT_CLASSIFY_CLIENT_H_
#define VIDCLF_CLIENT_CLASSIFY_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "inference/grpc_service.grpc.pb.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::client {

class ClassifyClient {
 public:
  // `protocol` as AddProtocolOption (connection.h) checked it.
  ClassifyClient(const std::shared_ptr<grpc::Channel>& channel, const std::string& protocol);

  // A call as it goes on the wire, converted once: bench sends each many times.
  struct Prepared {
    vidclf::v1::ClassifyRequest classify;
    inference::ModelInferRequest infer;
  };
  // `request` (settings, and a video or a URI) for this client's protocol.
  Prepared Prepare(vidclf::v1::ClassifyRequest request) const;

  // Sends `call`; the answer as vidclf.v1's, whichever protocol carried it.
  grpc::Status Classify(grpc::ClientContext* context, const Prepared& call,
                        vidclf::v1::ClassifyResponse* response) const;

 private:
  const bool v2_;
  std::unique_ptr<vidclf::v1::VideoClassifier::Stub> classifier_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> inference_;
};

}  // namespace vidclf::client

#endif  // VIDCLF_CLIENT_CLASSIFY_CLIENT_H_
