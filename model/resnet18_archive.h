// ResNet18 weights as a tensor archive: a plain dict of torchvision state-dict name -> tensor,
// pickled in PyTorch's zip format.
//
// This is how weights come from torchvision: model/scripts/export_resnet18.py writes
// torch.save(dict(resnet18.state_dict()), path), and LibTorch reads that with torch::pickle_load.
// (torch::load, which model bundles use, reads only the TorchScript archives torch::save writes,
// not a Python state dict.) The C++ side writes the same format, so Python can torch.load it.
#ifndef VIDCLF_MODEL_RESNET18_ARCHIVE_H_
#define VIDCLF_MODEL_RESNET18_ARCHIVE_H_

#include <torch/torch.h>

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/resnet18.h"

namespace vidclf::model {

// Reads a pickled dict of string -> tensor (tensors on the CPU). NOT_FOUND when `path` cannot be
// opened; INVALID_ARGUMENT when it is not such a dict.
absl::StatusOr<std::map<std::string, torch::Tensor>> ReadTensorArchive(const std::string& path);

// Writes `tensors` as a pickled dict that ReadTensorArchive and Python's torch.load read.
absl::Status WriteTensorArchive(const std::map<std::string, torch::Tensor>& tensors,
                                const std::string& path);

// Copies the archive's tensors into every parameter and buffer of `model`, converted to the
// model's dtype and device. The archive must hold exactly the model's names (torchvision's) with
// the same shapes; otherwise the error (INVALID_ARGUMENT) lists the missing and unexpected names
// and the shape mismatches, and `model` is left unchanged.
absl::Status LoadResNet18Archive(const std::string& path, ResNet18& model);

// Writes every parameter and buffer of `model` as an archive LoadResNet18Archive reads.
absl::Status SaveResNet18Archive(const ResNet18& model, const std::string& path);

}  // namespace vidclf::model

#endif  // VIDCLF_MODEL_RESNET18_ARCHIVE_H_
