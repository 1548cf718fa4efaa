#include "server/security/bearer_tokens.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace vidclf::security {
namespace {

constexpr absl::string_view kScheme = "Bearer ";
constexpr absl::string_view kExpires = "expires=";

std::array<unsigned char, 32> Sha256(absl::string_view text) {
  std::array<unsigned char, 32> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest.data());
  return digest;
}

}  // namespace

absl::StatusOr<std::vector<BearerTokens::Token>> BearerTokens::Read(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read the token file ", path));
  std::stringstream contents;
  contents << file.rdbuf();
  std::vector<Token> tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(contents.str(), '\n')) {
    ++line_number;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r\v\f"), absl::SkipEmpty());
    if (fields.empty() || absl::StartsWith(fields[0], "#")) continue;
    const std::string where = absl::StrCat(path, " line ", line_number, ": ");
    if (fields[0].size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat(where, "a token must have at least ",
                                                     kMinTokenLength,
                                                     " characters, so that it cannot be guessed"));
    }
    Token token{Sha256(fields[0]), absl::InfiniteFuture()};
    for (size_t i = 1; i < fields.size(); ++i) {
      std::string error;
      if (!absl::StartsWith(fields[i], kExpires) ||
          !absl::ParseTime(absl::RFC3339_full, fields[i].substr(kExpires.size()), &token.expires,
                           &error)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where,
            "after the token only expires=TIME (RFC 3339, like 2027-01-31T00:00:00Z) may "
            "follow, not \"",
            fields[i], "\""));
      }
    }
    tokens.push_back(token);
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token file ", path, " holds no token: every call would be refused"));
  }
  return tokens;
}

absl::StatusOr<std::unique_ptr<BearerTokens>> BearerTokens::Load(const std::string& path) {
  std::unique_ptr<BearerTokens> tokens(new BearerTokens(path));
  absl::StatusOr<int> count = tokens->Reload();
  if (!count.ok()) return count.status();
  return tokens;
}

absl::StatusOr<int> BearerTokens::Reload() {
  absl::StatusOr<std::vector<Token>> tokens = Read(path_);
  if (!tokens.ok()) return tokens.status();
  absl::MutexLock lock(&mutex_);
  tokens_ = *std::move(tokens);
  return static_cast<int>(tokens_.size());
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
  const std::array<unsigned char, 32> presented = Sha256(authorization.substr(kScheme.size()));
  // Every digest is compared, whichever matches: the time taken does not depend on the token.
  bool accepted = false;
  absl::Time expires = absl::InfiniteFuture();
  {
    absl::MutexLock lock(&mutex_);
    for (const Token& token : tokens_) {
      const bool match =
          CRYPTO_memcmp(token.digest.data(), presented.data(), presented.size()) == 0;
      accepted |= match;
      if (match) expires = token.expires;
    }
  }
  if (!accepted) return absl::UnauthenticatedError("the bearer token is not accepted");
  if (absl::Now() >= expires) {
    return absl::UnauthenticatedError(
        absl::StrCat("the bearer token expired at ",
                     absl::FormatTime(absl::RFC3339_sec, expires, absl::UTCTimeZone())));
  }
  return absl::OkStatus();
}

}  // namespace vidclf::security
