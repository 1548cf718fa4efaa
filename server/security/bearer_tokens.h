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
#include "absl/time/time.h"

namespace vidclf::security {

class BearerTokens {
 public:
  // Shorter tokens are refused: they could be guessed.
  static constexpr int kMinTokenLength = 16;

  // Reads `path`: one token per line, optionally followed by `expires=TIME` (RFC 3339, e.g.
  // 2027-01-31T00:00:00Z), after which the token is refused; blank lines and lines starting with
  // '#' are skipped. A file that holds no token, a token that is too short, or a field that is not
  // a valid `expires=`, is an error.
  static absl::StatusOr<std::unique_ptr<BearerTokens>> Load(const std::string& path);

  // Reads the file again. On failure the tokens read before stay in force and the error is
  // returned. Returns the number of tokens now accepted.
  absl::StatusOr<int> Reload();

  // OK when `authorization` (the value of the "authorization" metadata, empty if absent) is
  // "Bearer TOKEN" for an accepted TOKEN; UNAUTHENTICATED otherwise.
  absl::Status Check(absl::string_view authorization) const;

  const std::string& path() const { return path_; }

 private:
  struct Token {
    std::array<unsigned char, 32> digest;  // SHA-256 of the token
    absl::Time expires;                    // absl::InfiniteFuture() when it does not
  };
  explicit BearerTokens(std::string path) : path_(std::move(path)) {}
  // The tokens in the file at `path`.
  static absl::StatusOr<std::vector<Token>> Read(const std::string& path);

  const std::string path_;
  mutable absl::Mutex mutex_;
  std::vector<Token> tokens_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace vidclf::security

#endif  // VIDCLF_SERVER_SECURITY_BEARER_TOKENS_H_
