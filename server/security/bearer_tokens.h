// The bearer tokens that calls must present, read from a file that may be re-read (on SIGHUP)
// while calls are being checked.
//
// Tokens are kept only as SHA-256 digests, and a presented token is compared with every one of
// them in constant time: how long a check takes says nothing of how much of a token was right.
#ifndef VIDCLF_SERVER_SECURITY_BEARER_TOKENS_H_
#define VIDCLF_SERVER_SECURITY_BEARER_TOKENS_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace vidclf::security {

class BearerTokens {
 public:
  // Shorter tokens are refused: they could be guessed.
  static constexpr int kMinTokenLength = 16;

  // Reads `path`: one token per line; blank lines and lines starting with '#' are skipped, and
  // spaces around a token are trimmed. A file that holds no token, or a token that is too short
  // or holds spaces, is an error.
  static absl::StatusOr<std::unique_ptr<BearerTokens>> Load(const std::string& path);

  // Reads the file again. On failure the tokens read before stay in force and the error is
  // returned. Returns the number of tokens now accepted.
  absl::StatusOr<int> Reload();

  // OK when `authorization` (the value of the "authorization" metadata, empty if absent) is
  // "Bearer TOKEN" for an accepted TOKEN; UNAUTHENTICATED otherwise.
  absl::Status Check(absl::string_view authorization) const;

  const std::string& path() const { return path_; }

 private:
  using Digest = std::array<unsigned char, 32>;
  explicit BearerTokens(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  mutable absl::Mutex mutex_;
  std::vector<Digest> digests_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace vidclf::security

#endif  // VIDCLF_SERVER_SECURITY_BEARER_TOKENS_H_
