#include "model/resnet18_archive.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "caffe2/serialize/inline_container.h"
#include "torch/csrc/jit/serialization/export.h"
#include "torch/csrc/jit/serialization/pickler.h"

namespace vidclf::model {
namespace {

constexpr char kExporter[] = "model/scripts/export_resnet18.py";

std::string Shape(const torch::Tensor& tensor) {
  return absl::StrCat("[", absl::StrJoin(tensor.sizes(), ", "), "]");
}

absl::Status NotAnArchive(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is not a tensor archive written by ", kExporter, ": ", why));
}

// Lists at most a few names, so that an archive of another network gives a readable message.
std::string Names(const std::vector<std::string>& names) {
  constexpr size_t kShown = 5;
  std::string listed =
      absl::StrJoin(names.begin(), names.begin() + std::min(kShown, names.size()), ", ");
  if (names.size() > kShown) absl::StrAppend(&listed, ", ... (", names.size() - kShown, " more)");
  return listed;
}

// The model's state dict: parameters and buffers by name, as torchvision's state_dict() has them.
std::map<std::string, torch::Tensor> StateDict(const ResNet18& model) {
  std::map<std::string, torch::Tensor> state;
  for (const auto& item : model->named_parameters()) state[item.key()] = item.value();
  for (const auto& item : model->named_buffers()) state[item.key()] = item.value();
  return state;
}

}  // namespace

absl::StatusOr<std::map<std::string, torch::Tensor>> ReadTensorArchive(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("cannot open tensor archive ", path,
                                            " (is the path right? ", kExporter, " writes them)"));
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  if (file.bad()) return absl::NotFoundError(absl::StrCat("cannot read tensor archive ", path));
  torch::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const c10::Error& e) {
    return NotAnArchive(path, e.what_without_backtrace());
  }
  if (!value.isGenericDict()) {
    return NotAnArchive(path, absl::StrCat("it holds a ", value.tagKind(), ", not a dict"));
  }
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString()) {
      return NotAnArchive(path,
                          absl::StrCat("a key is a ", entry.key().tagKind(), ", not a string"));
    }
    const std::string name = entry.key().toStringRef();
    if (!entry.value().isTensor()) {
      return NotAnArchive(path,
                          absl::StrCat(name, " is a ", entry.value().tagKind(), ", not a tensor"));
    }
    tensors[name] = entry.value().toTensor();
  }
  return tensors;
}

absl::Status WriteTensorArchive(const std::map<std::string, torch::Tensor>& tensors,
                                const std::string& path) {
  std::vector<char> bytes;
  try {
    c10::Dict<std::string, at::Tensor> dict;
    // Saved from the CPU and detached, so that torch.load needs no GPU and no autograd history.
    for (const auto& [name, tensor] : tensors) dict.insert(name, tensor.detach().cpu());
    // torch::pickle_save would tag the dict with its type through a global that torch.load has
    // refused since PyTorch 2.6 (weights_only): pickle it untagged, as a plain dict of tensors.
    std::vector<char> pickled;
    torch::jit::Pickler pickler(
        [&pickled](const char* data, size_t size) {
          pickled.insert(pickled.end(), data, data + size);
        },
        /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
        /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(dict);
    pickler.stop();
    caffe2::serialize::PyTorchStreamWriter writer([&bytes](const void* data, size_t size) {
      const char* begin = static_cast<const char*>(data);
      bytes.insert(bytes.end(), begin, begin + size);
      return size;
    });
    torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(),
                                       writer);
    writer.writeEndOfFile();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("cannot write tensor archive ", path, ": ", e.what_without_backtrace()));
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file.flush()) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write tensor archive ", path));
  }
  return absl::OkStatus();
}

absl::Status LoadResNet18Archive(const std::string& path, ResNet18& model) {
  absl::StatusOr<std::map<std::string, torch::Tensor>> archive = ReadTensorArchive(path);
  if (!archive.ok()) return archive.status();
  const std::map<std::string, torch::Tensor> state = StateDict(model);

  // Check everything before copying anything, so that a bad archive leaves the model as it was.
  std::vector<std::string> missing;
  std::vector<std::string> mismatched;
  for (const auto& [name, tensor] : state) {
    const auto found = archive->find(name);
    if (found == archive->end()) {
      missing.push_back(name);
    } else if (found->second.sizes() != tensor.sizes()) {
      mismatched.push_back(absl::StrCat(name, " has shape ", Shape(found->second),
                                        " in the archive but ", Shape(tensor), " in ResNet18"));
    }
  }
  std::vector<std::string> unexpected;
  for (const auto& item : *archive) {
    if (state.count(item.first) == 0) unexpected.push_back(item.first);
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::vector<std::string> problems;
    if (!missing.empty()) {
      problems.push_back(absl::StrCat(missing.size(), " missing (", Names(missing), ")"));
    }
    if (!unexpected.empty()) {
      problems.push_back(absl::StrCat(unexpected.size(), " unexpected (", Names(unexpected), ")"));
    }
    if (!mismatched.empty()) problems.push_back(Names(mismatched));
    return absl::InvalidArgumentError(
        absl::StrCat(path, " does not hold torchvision's resnet18 state dict (export it with ",
                     kExporter, "): ", absl::StrJoin(problems, "; ")));
  }

  try {
    // copy_ writes into the existing tensors, converting dtype and device (num_batches_tracked
    // stays int64), and keeps them registered; NoGradGuard because parameters require grad.
    torch::NoGradGuard no_grad;
    for (const auto& [name, tensor] : state) tensor.copy_(archive->at(name));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot copy the weights in ", path, ": ", e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

absl::Status SaveResNet18Archive(const ResNet18& model, const std::string& path) {
  return WriteTensorArchive(StateDict(model), path);
}

}  // namespace vidclf::model
