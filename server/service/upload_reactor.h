// ClassifyUpload: a video sent in chunks, decoded as they arrive.
#ifndef VIDCLF_SERVER_SERVICE_UPLOAD_REACTOR_H_
#define VIDCLF_SERVER_SERVICE_UPLOAD_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include "server/service/classify_submission.h"

namespace vidclf::service {

// `submitter` must outlive the call. The reactor parses each message itself (raw_message.h) and
// writes the serialized ClassifyResponse to `response` before it finishes.
grpc::ServerReadReactor<grpc::ByteBuffer>* NewUploadReactor(const ClassifySubmitter* submitter,
                                                            grpc::CallbackServerContext* context,
                                                            grpc::ByteBuffer* response);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_UPLOAD_REACTOR_H_
