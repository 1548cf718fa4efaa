#include "server/security/bearer_tokens.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace vidclf::security {
namespace {

constexpr absl::string_view kScheme = "Bearer ";

std::array<unsigned char, 32> Sha256(absl::string_view text) {
  std::array<unsigned char, 32> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return digest;
}

// The digests of the tokens in the file at `path`.
absl::StatusOr<std::vector<std::array<unsigned char, 32>>> ReadTokenFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read the token file ", path));
  std::stringstream contents;
  contents << file.rdbuf();
  std::vector<std::array<unsigned char, 32>> digests;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(contents.str(), '\n')) {
    ++line_number;
    const absl::string_view token = absl::StripAsciiWhitespace(line);
    if (token.empty() || absl::StartsWith(token, "#")) continue;
    const std::string where = absl::StrCat(path, " line ", line_number, ": ");
    if (token.size() < BearerTokens::kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat(where, "a token must have at least ",
                                                     BearerTokens::kMinTokenLength,
                                                     " characters, so that it cannot be guessed"));
    }
    if (token.find_first_of(" \t\r\v\f") != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, "a token may not hold spaces"));
    }
    digests.push_back(Sha256(token));
  }
  if (digests.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token file ", path, " holds no token: every call would be refused"));
  }
  return digests;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BearerTokens>> BearerTokens::Load(const std::string& path) {
  std::unique_ptr<BearerTokens> tokens(new BearerTokens(path));
  absl::StatusOr<int> count = tokens->Reload();
  if (!count.ok()) return count.status();
  return tokens;
}

absl::StatusOr<int> BearerTokens::Reload() {
  absl::StatusOr<std::vector<Digest>> digests = ReadTokenFile(path_);
  if (!digests.ok()) return digests.status();
  absl::MutexLock lock(&mutex_);
  digests_ = *std::move(digests);
  return static_cast<int>(digests_.size());
}

absl::Status BearerTokens::Check(absl::string_view authorization) const {
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "this server needs a bearer token: send the metadata \"authorization: Bearer TOKEN\" "
        "(vidclf: --token-file)");
  }
  // The scheme is case-insensitive (RFC 7235); the token is not.
  if (authorization.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme)) {
    return absl::UnauthenticatedError("the authorization metadata must read \"Bearer TOKEN\"");
  }
  const Digest presented = Sha256(authorization.substr(kScheme.size()));
  // Every digest is compared, whichever matches: the time taken does not depend on the token.
  bool accepted = false;
  absl::MutexLock lock(&mutex_);
  for (const Digest& digest : digests_) {
    accepted |= CRYPTO_memcmp(digest.data(), presented.data(), digest.size()) == 0;
  }
  if (!accepted) return absl::UnauthenticatedError("the bearer token is not accepted");
  return absl::OkStatus();
}

}  // namespace vidclf::security
