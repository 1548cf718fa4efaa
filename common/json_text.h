// JSON as text that never throws on what it holds: a string that is not UTF-8 (a client's path,
// a file's name) is written with U+FFFD in place of its bad bytes, where nlohmann's plain dump()
// throws, and an exception on a server's thread ends the process.
#ifndef VIDCLF_COMMON_JSON_TEXT_H_
#define VIDCLF_COMMON_JSON_TEXT_H_

#include <string>

namespace vidclf {

// `json` (an nlohmann::json or ordered_json) as text, `indent` as dump() takes it.
template <typename Json>
std::string JsonText(const Json& json, int indent = -1) {
  return json.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace vidclf

#endif  // VIDCLF_COMMON_JSON_TEXT_H_
