// A streaming call whose reactor cannot be made (its making throws) ends as INTERNAL, counted, on a
// real gRPC server on loopback, which then answers the next call.
#include "server/service/guarded_reactor.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <stdexcept>
#include <string>

#include "server/internal_errors.h"

namespace vidclf::service {
namespace {

// Answers OK at once.
class AnsweringReactor final : public grpc::ServerGenericBidiReactor {
 public:
  AnsweringReactor() { Finish(grpc::Status::OK); }
  void OnDone() override { delete this; }
};

// Every method's reactor is made through NewGuardedReactor; /test.Methods/Broken's making throws.
class Methods final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    return NewGuardedReactor<grpc::ServerGenericBidiReactor>(
        context->method(), [&]() -> grpc::ServerGenericBidiReactor* {
          if (context->method() == "/test.Methods/Broken") throw std::logic_error("a bug");
          return new AnsweringReactor();
        });
  }
};

grpc::Status Call(grpc::GenericStub& stub, const std::string& method) {
  grpc::ClientContext context;
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;  // a ByteBuffer made of nothing is no message
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(status); });
  return done.get_future().get();
}

TEST(GuardedReactorTest, AReactorWhoseMakingThrowsEndsItsCallOnlyAsInternal) {
  Methods methods;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(&methods);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  grpc::GenericStub stub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  const int64_t before = InternalErrorCounts()["grpc"];
  const grpc::Status broken = Call(stub, "/test.Methods/Broken");
  EXPECT_EQ(broken.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(broken.error_message(), std::string(kInternalErrorMessage));
  EXPECT_EQ(InternalErrorCounts()["grpc"], before + 1);
  EXPECT_TRUE(Call(stub, "/test.Methods/Working").ok());
  EXPECT_EQ(InternalErrorCounts()["grpc"], before + 1);
  server->Shutdown();
}

}  // namespace
}  // namespace vidclf::service
