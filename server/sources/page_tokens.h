// ListSources's page tokens, opaque as AIP-158 asks: a token names where the next page starts
// and is signed (HMAC-SHA256 under a key of this process) together with the filter and page size
// it was issued for, so that a token the server did not issue, or one sent with another filter
// or page size, is refused instead of read as a place to start. A token does not outlive the
// process that issued it: after a restart a client lists from the start again.
#ifndef VIDCLF_SERVER_SOURCES_PAGE_TOKENS_H_
#define VIDCLF_SERVER_SOURCES_PAGE_TOKENS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vidclf::sources {

// Thread-safe: the key is fixed at construction.
class PageTokens {
 public:
  PageTokens();  // a random key

  // The token of the page after the one that ended with source `last_id`.
  std::string Issue(absl::string_view last_id, absl::string_view filter, int page_size) const;

  // The id after which the page `token` asks for starts; INVALID_ARGUMENT when this process did
  // not issue it for this `filter` and `page_size`.
  absl::StatusOr<std::string> Read(absl::string_view token, absl::string_view filter,
                                   int page_size) const;

 private:
  std::string Signature(absl::string_view last_id, absl::string_view filter, int page_size) const;

  std::string key_;
};

}  // namespace vidclf::sources

#endif  // VIDCLF_SERVER_SOURCES_PAGE_TOKENS_H_
