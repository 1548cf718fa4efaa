// The service's messages as bytes: its methods take and give grpc::ByteBuffer and parse and
// serialize themselves, so that a request whose protobuf cannot be parsed gets INVALID_ARGUMENT
// saying so. (A typed callback method never sees such a request: gRPC C++ answers it
// UNIMPLEMENTED, with no message, before any handler runs.)
#ifndef VIDCLF_SERVER_SERVICE_RAW_MESSAGE_H_
#define VIDCLF_SERVER_SERVICE_RAW_MESSAGE_H_

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/message.h"

namespace vidclf::service {

// Parses `buffer` (consumed) into `message`; INVALID_ARGUMENT naming the message type when its
// bytes are not one.
inline absl::Status ParseMessage(grpc::ByteBuffer* buffer, google::protobuf::Message* message) {
  const size_t bytes = buffer->Length();
  grpc::ProtoBufferReader reader(buffer);
  const bool parsed = message->ParseFromZeroCopyStream(&reader);
  buffer->Clear();
  if (parsed) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the request is not a valid ", message->GetTypeName(), ": its ", bytes,
      " bytes are not that protobuf message (a client built from another .proto, or a damaged "
      "message)"));
}

// Parses a unary call's request, `buffer` left as it was (a copy shares its slices).
inline absl::Status ParseRequest(const grpc::ByteBuffer& buffer,
                                 google::protobuf::Message* message) {
  grpc::ByteBuffer bytes(buffer);
  return ParseMessage(&bytes, message);
}

inline grpc::ByteBuffer SerializeMessage(const google::protobuf::Message& message) {
  grpc::ByteBuffer buffer;
  bool own_buffer = false;
  grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(message, &buffer,
                                                                             &own_buffer);
  return buffer;
}

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_RAW_MESSAGE_H_
