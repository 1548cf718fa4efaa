// Tensor archives of ResNet18 weights (model/resnet18_archive.h): the C++ round trip, the errors,
// and torchvision interop through model/scripts/export_resnet18.py.
#include "model/resnet18_archive.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>

namespace vidclf::model {
namespace {

using ::testing::HasSubstr;

class ResNet18ArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("vidclf_resnet18_archive_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

std::map<std::string, torch::Tensor> StateDict(const ResNet18& net) {
  std::map<std::string, torch::Tensor> state;
  for (const auto& item : net->named_parameters()) state[item.key()] = item.value();
  for (const auto& item : net->named_buffers()) state[item.key()] = item.value();
  return state;
}

// A seeded ResNet18 whose batch-norm statistics differ from a fresh one's too, so that the
// round trip has to carry buffers as well as parameters.
ResNet18 SeededResNet18(uint64_t seed) {
  torch::manual_seed(seed);
  ResNet18 net;
  torch::NoGradGuard no_grad;
  for (const auto& item : net->named_buffers()) {
    torch::Tensor buffer = item.value();
    if (item.key().find("running_mean") != std::string::npos) buffer.normal_(0, 0.1);
    if (item.key().find("running_var") != std::string::npos) buffer.uniform_(0.5, 1.5);
    if (item.key().find("num_batches_tracked") != std::string::npos) {
      buffer.fill_(torch::randint(1, 1000, {1}, torch::kLong).item<int64_t>());
    }
  }
  return net;
}

// Every parameter and buffer of `a` equals `b`'s, bit for bit and in dtype.
::testing::AssertionResult SameState(const ResNet18& a, const ResNet18& b) {
  const auto sa = StateDict(a);
  const auto sb = StateDict(b);
  if (sa.size() != sb.size()) return ::testing::AssertionFailure() << "different names";
  for (const auto& [name, tensor] : sa) {
    if (tensor.dtype() != sb.at(name).dtype() || !torch::equal(tensor, sb.at(name))) {
      return ::testing::AssertionFailure() << name << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(ResNet18ArchiveTest, RoundTripIsBitExact) {
  ResNet18 saved = SeededResNet18(5);
  ASSERT_TRUE(SaveResNet18Archive(saved, Path("resnet18.pt")).ok());
  ResNet18 loaded = SeededResNet18(6);
  ASSERT_FALSE(SameState(saved, loaded));
  const absl::Status status = LoadResNet18Archive(Path("resnet18.pt"), loaded);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(SameState(saved, loaded));
  EXPECT_EQ(StateDict(loaded).at("bn1.num_batches_tracked").scalar_type(), torch::kLong);

  saved->eval();
  loaded->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor frames = torch::randn({2, 3, 64, 64});
  EXPECT_TRUE(torch::equal(saved->forward(frames), loaded->forward(frames)));
}

TEST_F(ResNet18ArchiveTest, ConvertsToTheModelsDtype) {
  const ResNet18 saved = SeededResNet18(5);
  std::map<std::string, torch::Tensor> doubles = StateDict(saved);
  for (auto& [name, tensor] : doubles) {
    if (tensor.is_floating_point()) tensor = tensor.to(torch::kDouble);
  }
  ASSERT_TRUE(WriteTensorArchive(doubles, Path("double.pt")).ok());
  ResNet18 loaded;
  const absl::Status status = LoadResNet18Archive(Path("double.pt"), loaded);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(SameState(saved, loaded));  // float -> double -> float is exact
}

TEST_F(ResNet18ArchiveTest, MissingFileIsNotFound) {
  ResNet18 net;
  const absl::Status status = LoadResNet18Archive(Path("absent.pt"), net);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(), HasSubstr("absent.pt"));
}

TEST_F(ResNet18ArchiveTest, RandomBytesAreNotAnArchive) {
  std::mt19937 random(1);
  std::ofstream file(Path("noise.pt"), std::ios::binary);
  for (int i = 0; i < 4096; ++i) file.put(static_cast<char>(random()));
  file.close();
  ResNet18 net;
  const absl::Status status = LoadResNet18Archive(Path("noise.pt"), net);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("noise.pt is not a tensor archive written by "
                                          "model/scripts/export_resnet18.py"));
}

TEST_F(ResNet18ArchiveTest, DictOfNonTensorsIsNotAnArchive) {
  c10::Dict<std::string, int64_t> dict;
  dict.insert("conv1.weight", 3);
  const std::vector<char> bytes = torch::pickle_save(dict);
  std::ofstream(Path("ints.pt"), std::ios::binary).write(bytes.data(), bytes.size());
  const auto archive = ReadTensorArchive(Path("ints.pt"));
  EXPECT_EQ(archive.status().code(), absl::StatusCode::kInvalidArgument) << archive.status();
  EXPECT_THAT(archive.status().message(), HasSubstr("conv1.weight is a Int, not a tensor"));
}

TEST_F(ResNet18ArchiveTest, MissingKeyIsNamed) {
  std::map<std::string, torch::Tensor> state = StateDict(SeededResNet18(5));
  state.erase("layer3.1.bn2.running_var");
  ASSERT_TRUE(WriteTensorArchive(state, Path("missing.pt")).ok());
  ResNet18 net = SeededResNet18(6);
  const ResNet18 before = SeededResNet18(6);
  const absl::Status status = LoadResNet18Archive(Path("missing.pt"), net);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("1 missing (layer3.1.bn2.running_var)"));
  EXPECT_TRUE(SameState(net, before));  // nothing was copied
}

TEST_F(ResNet18ArchiveTest, UnexpectedKeyIsNamed) {
  std::map<std::string, torch::Tensor> state = StateDict(SeededResNet18(5));
  state["module.fc.weight"] = torch::zeros({2});
  ASSERT_TRUE(WriteTensorArchive(state, Path("extra.pt")).ok());
  ResNet18 net;
  const absl::Status status = LoadResNet18Archive(Path("extra.pt"), net);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("1 unexpected (module.fc.weight)"));
}

TEST_F(ResNet18ArchiveTest, WrongShapeIsNamed) {
  std::map<std::string, torch::Tensor> state = StateDict(SeededResNet18(5));
  state["fc.weight"] = torch::zeros({10, 512});
  ASSERT_TRUE(WriteTensorArchive(state, Path("shape.pt")).ok());
  ResNet18 net = SeededResNet18(6);
  const ResNet18 before = SeededResNet18(6);
  const absl::Status status = LoadResNet18Archive(Path("shape.pt"), net);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("fc.weight has shape [10, 512] in the archive but "
                                          "[1000, 512] in ResNet18"));
  EXPECT_TRUE(SameState(net, before));
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string ReadText(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Runs `command` through the shell with its output in `log`; returns its exit status.
int RunShell(const std::string& command, const std::string& log) {
  return std::system((command + " >'" + log + "' 2>&1").c_str());
}

// torchvision's resnet18, exported by the script, gives the embeddings torchvision computes.
// Needs Debian's python3-torchvision; fails rather than skips without it, since
// scripts/install-deps.sh installs it. ctest names Debian's python3 and the export script in the
// environment (tests/CMakeLists.txt).
TEST_F(ResNet18ArchiveTest, MatchesTorchvisionThroughTheExportScript) {
  const std::string python = EnvOr("VIDCLF_TORCHVISION_PYTHON3", "");
  const std::string script = EnvOr("VIDCLF_EXPORT_RESNET18_SCRIPT", "");
  ASSERT_FALSE(python.empty() || script.empty())
      << "run through ctest, which sets VIDCLF_TORCHVISION_PYTHON3 and "
         "VIDCLF_EXPORT_RESNET18_SCRIPT (a python3 with torchvision, model/scripts/"
         "export_resnet18.py)";
  const std::string log = Path("export.log");
  const std::string export_command = "'" + python + "' '" + script +
                                     "' --random-seed 3 --output '" + Path("resnet18.pt") +
                                     "' --reference-output '" + Path("reference.pt") + "'";
  ASSERT_EQ(RunShell(export_command, log), 0)
      << export_command << " failed (is python3-torchvision installed? run "
      << "scripts/install-deps.sh):\n"
      << ReadText(log);

  ResNet18 net;
  const absl::Status status = LoadResNet18Archive(Path("resnet18.pt"), net);
  ASSERT_TRUE(status.ok()) << status;
  const auto archive = ReadTensorArchive(Path("resnet18.pt"));
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_EQ(archive->size(), 122u);
  for (const auto& [name, tensor] : StateDict(net)) {
    EXPECT_TRUE(torch::equal(tensor, archive->at(name))) << name;
  }

  const auto reference = ReadTensorArchive(Path("reference.pt"));
  ASSERT_TRUE(reference.ok()) << reference.status();
  const torch::Tensor frames = reference->at("frames");
  const torch::Tensor expected = reference->at("embeddings");
  ASSERT_EQ(frames.sizes(), (std::vector<int64_t>{2, 3, 64, 64}));
  ASSERT_EQ(expected.sizes(), (std::vector<int64_t>{2, kResNet18EmbeddingSize}));
  net->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor embeddings = net->forward(frames);
  const double max_abs_diff = (embeddings - expected).abs().max().item<double>();
  const double max_abs = expected.abs().max().item<double>();
  std::cout << "max |ours - torchvision| = " << max_abs_diff << " (max |torchvision| = " << max_abs
            << ")" << std::endl;
  RecordProperty("max_abs_diff", std::to_string(max_abs_diff));
  EXPECT_LT(max_abs_diff, 1e-4);
  EXPECT_GT(max_abs, 0.1);  // the comparison means something

  // And the other way: Python reads what C++ writes, with the restricted unpickler that
  // torch.load uses by default since PyTorch 2.6.
  ASSERT_TRUE(SaveResNet18Archive(net, Path("from_cpp.pt")).ok());
  const std::string read_command =
      "'" + python +
      "' -c 'import sys, torch, torchvision; d = torch.load(sys.argv[1], weights_only=True); "
      "assert type(d) is dict, type(d); "
      "torchvision.models.resnet18().load_state_dict(d, strict=True)' '" +
      Path("from_cpp.pt") + "'";
  ASSERT_EQ(RunShell(read_command, log), 0) << read_command << " failed:\n" << ReadText(log);
}

}  // namespace
}  // namespace vidclf::model
