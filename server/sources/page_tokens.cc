#include "server/sources/page_tokens.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace vidclf::sources {
namespace {

constexpr size_t kKeyBytes = 32;
constexpr size_t kSignatureBytes = 16;  // of HMAC-SHA256's 32: enough against guessing

}  // namespace

PageTokens::PageTokens() : key_(kKeyBytes, '\0') {
  RAND_bytes(reinterpret_cast<unsigned char*>(key_.data()), static_cast<int>(key_.size()));
}

std::string PageTokens::Signature(absl::string_view last_id, absl::string_view filter,
                                  int page_size) const {
  // Lengths first, so that no two (id, filter, size) give the same bytes.
  const std::string message =
      absl::StrCat(last_id.size(), ":", last_id, filter.size(), ":", filter, page_size);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  return std::string(reinterpret_cast<const char*>(digest), kSignatureBytes);
}

std::string PageTokens::Issue(absl::string_view last_id, absl::string_view filter,
                              int page_size) const {
  return absl::WebSafeBase64Escape(absl::StrCat(Signature(last_id, filter, page_size), last_id));
}

absl::StatusOr<std::string> PageTokens::Read(absl::string_view token, absl::string_view filter,
                                             int page_size) const {
  std::string bytes;
  if (!absl::WebSafeBase64Unescape(token, &bytes) || bytes.size() < kSignatureBytes) {
    return absl::InvalidArgumentError(
        "page_token is not one a ListSources answer gave: list from the start without it");
  }
  const std::string last_id = bytes.substr(kSignatureBytes);
  const std::string expected = Signature(last_id, filter, page_size);
  if (CRYPTO_memcmp(expected.data(), bytes.data(), kSignatureBytes) != 0) {
    return absl::InvalidArgumentError(
        "page_token is not one a ListSources answer gave for this filter and page_size (or it "
        "is from before the server restarted): list from the start without it, or send the "
        "filter and page_size it came with");
  }
  return last_id;
}

}  // namespace vidclf::sources
