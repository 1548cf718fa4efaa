// The numbers of a comma-separated flag ("16,64,256"), as every benchmark here takes its sweeps.
#ifndef VIDCLF_BENCH_LIST_FLAG_H_
#define VIDCLF_BENCH_LIST_FLAG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace vidclf::bench {

// Throws std::invalid_argument for a part that is not a number, as std::stoll does.
inline std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> values;
  for (const absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    values.push_back(std::stoll(std::string(part)));
  }
  return values;
}

}  // namespace vidclf::bench

#endif  // VIDCLF_BENCH_LIST_FLAG_H_
