#include "server/sources/source_store.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "common/proto_json.h"

namespace vidclf::sources {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

// Writes `bytes` to `path` and flushes them to disk.
absl::Status WriteDurably(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot create", path);
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const absl::Status status = Errno("cannot write", path);
      ::close(fd);
      return status;
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const absl::Status status = Errno("cannot flush", path);
    ::close(fd);
    return status;
  }
  if (::close(fd) != 0) return Errno("cannot close", path);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<StateDirectoryStore>> StateDirectoryStore::Open(
    const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("--state-dir: cannot create '", directory, "': ", error.message()));
  }
  ::chmod(directory.c_str(), 0700);
  auto store = std::unique_ptr<StateDirectoryStore>(
      new StateDirectoryStore(directory, (std::filesystem::path(directory) / "sources.json")));
  // Refuse to start on a file that cannot be read, before anything could overwrite it.
  if (auto loaded = store->Load(); !loaded.ok()) return loaded.status();
  return store;
}

absl::StatusOr<std::vector<vidclf::v1::Source>> StateDirectoryStore::Load() {
  std::vector<vidclf::v1::Source> sources;
  std::ifstream file(path_);
  if (!file) {
    if (!std::filesystem::exists(path_)) return sources;
    return absl::FailedPreconditionError(
        absl::StrCat("the state file '", path_, "' cannot be read: ", std::strerror(errno)));
  }
  std::stringstream text;
  text << file.rdbuf();
  const auto refuse = [&](absl::string_view what) {
    return absl::FailedPreconditionError(
        absl::StrCat("the state file '", path_, "' ", what,
                     "; it was left as it is: fix it, or move it away to start with no sources"));
  };
  const nlohmann::json json =
      nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return refuse("is not valid JSON");
  if (!json.is_object() || !json.contains("version") || !json["version"].is_number_integer()) {
    return refuse("has no version");
  }
  if (json["version"].get<int>() != kVersion) {
    return refuse(absl::StrCat("is of version ", JsonText(json["version"]), "; this server reads ",
                               kVersion));
  }
  if (!json.contains("sources") || !json["sources"].is_array()) return refuse("has no sources");
  for (const nlohmann::json& entry : json["sources"]) {
    vidclf::v1::Source source;
    const auto parsed = google::protobuf::util::JsonStringToMessage(JsonText(entry), &source);
    if (!parsed.ok()) {
      return refuse(absl::StrCat("holds a source that is not valid: ",
                                 std::string(parsed.message().data(), parsed.message().size())));
    }
    sources.push_back(std::move(source));
  }
  return sources;
}

absl::Status StateDirectoryStore::Save(const std::vector<vidclf::v1::Source>& sources) {
  nlohmann::json json = {{"version", kVersion}, {"sources", nlohmann::json::array()}};
  for (const vidclf::v1::Source& source : sources) {
    json["sources"].push_back(nlohmann::json::parse(ProtoJson(source)));
  }
  return ReplaceFile(path_, JsonText(json, 2) + "\n");
}

absl::Status StateDirectoryStore::ReplaceFile(const std::string& path,
                                              const std::string& bytes) const {
  const std::string temporary = path + ".tmp";
  if (auto status = WriteDurably(temporary, bytes); !status.ok()) return status;
  if (::rename(temporary.c_str(), path.c_str()) != 0) return Errno("cannot replace", path);
  // The rename itself reaches the disk once its directory is flushed.
  const std::string parent = std::filesystem::path(path).parent_path();
  const int directory = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory >= 0) {
    ::fsync(directory);
    ::close(directory);
  }
  return absl::OkStatus();
}

std::string StateDirectoryStore::CheckpointPath(const std::string& id) const {
  return (std::filesystem::path(directory_) / "checkpoints" / id).string();
}

absl::Status StateDirectoryStore::SaveCheckpoint(const std::string& id, const std::string& bytes) {
  std::error_code error;
  const std::filesystem::path checkpoints = std::filesystem::path(directory_) / "checkpoints";
  std::filesystem::create_directories(checkpoints, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create the checkpoints directory in '",
                                            directory_, "': ", error.message()));
  }
  // The server's alone, as the state directory is: a head's state says what a camera showed.
  ::chmod(checkpoints.c_str(), 0700);
  return ReplaceFile(CheckpointPath(id), bytes);
}

absl::StatusOr<std::optional<std::string>> StateDirectoryStore::LoadCheckpoint(
    const std::string& id) {
  const std::string path = CheckpointPath(id);
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    if (!std::filesystem::exists(path)) return std::optional<std::string>();
    return absl::InternalError(absl::StrCat("cannot read '", path, "': ", std::strerror(errno)));
  }
  std::stringstream bytes;
  bytes << file.rdbuf();
  return std::optional<std::string>(bytes.str());
}

absl::Status StateDirectoryStore::DeleteCheckpoint(const std::string& id) {
  std::error_code error;
  std::filesystem::remove(CheckpointPath(id), error);
  if (error) return absl::InternalError(absl::StrCat("cannot delete the checkpoint of ", id));
  return absl::OkStatus();
}

}  // namespace vidclf::sources
