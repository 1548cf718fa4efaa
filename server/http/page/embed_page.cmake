# Writes OUTPUT, a C++ file that defines vidclf::http::PageFiles() (web_page.h) with the bytes of
# each of FILES, named by its file name. Run by the build: cmake -DOUTPUT=... -DFILES="a;b" -P
cmake_minimum_required(VERSION 3.18)
set(arrays "")
set(entries "")
set(index 0)
foreach(path IN LISTS FILES)
  get_filename_component(name "${path}" NAME)
  file(READ "${path}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND arrays "constexpr unsigned char kFile${index}[] = {${bytes}};\n")
  string(APPEND entries "      {\"${name}\", absl::string_view(reinterpret_cast<const char*>(kFile${index}), sizeof(kFile${index}))},\n")
  math(EXPR index "${index} + 1")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Made by server/http/page/embed_page.cmake from server/http/page/.
#include \"server/http/web_page.h\"

namespace vidclf::http {
namespace {
${arrays}}  // namespace

const std::vector<PageFile>& PageFiles() {
  static const std::vector<PageFile> files = {
${entries}  };
  return files;
}

}  // namespace vidclf::http
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
