// The Open Inference Protocol's raw tensor bytes (raw_input_contents, raw_output_contents, the
// REST binary-data extension), as the server and the client both write and read them: elements
// little endian, each BYTES element preceded by its length as 4 little-endian bytes.
#ifndef VIDCLF_COMMON_TENSOR_BYTES_H_
#define VIDCLF_COMMON_TENSOR_BYTES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace vidclf {

// The 4 little-endian bytes at `at` as a number; `at` must have them.
inline uint32_t LittleEndian32(absl::string_view bytes, size_t at) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[at + static_cast<size_t>(i)]);
  }
  return value;
}

inline void AppendLittleEndian32(uint32_t value, std::string* raw) {
  for (int i = 0; i < 4; ++i) raw->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

inline void AppendBytesElement(absl::string_view element, std::string* raw) {
  AppendLittleEndian32(static_cast<uint32_t>(element.size()), raw);
  raw->append(element.data(), element.size());
}

inline void AppendFp32(float value, std::string* raw) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  AppendLittleEndian32(bits, raw);
}

// A BYTES tensor's elements; a last element cut short is left out.
inline std::vector<std::string> BytesElements(absl::string_view raw) {
  std::vector<std::string> elements;
  for (size_t at = 0; at + 4 <= raw.size();) {
    const uint32_t length = LittleEndian32(raw, at);
    if (raw.size() - at - 4 < length) break;
    elements.emplace_back(raw.substr(at + 4, length));
    at += 4 + length;
  }
  return elements;
}

inline std::vector<float> Fp32Elements(absl::string_view raw) {
  std::vector<float> elements(raw.size() / sizeof(float));
  for (size_t i = 0; i < elements.size(); ++i) {
    const uint32_t bits = LittleEndian32(raw, 4 * i);
    std::memcpy(&elements[i], &bits, sizeof bits);
  }
  return elements;
}

}  // namespace vidclf

#endif  // VIDCLF_COMMON_TENSOR_BYTES_H_
