// The attention mechanisms a transformer head can use, behind one signature.
//
// A mechanism is the "inner attention" of fast-transformers: it mixes already-projected queries,
// keys and values. The projections and the head split live in the layer that owns the mechanism,
// so every mechanism sees the same shapes:
//
//   queries  [B, H, L, E]   B batch, H heads, L query positions, E query/key width per head
//   keys     [B, H, S, E]   S key positions
//   values   [B, H, S, M]   M value width per head
//   key_padding_mask  [B, S] bool, true where the key is a real frame, false where it is padding;
//                     an undefined tensor means every key is real
//   result   [B, H, L, M]
//
// Padded keys never influence any output row. Outputs at padded query positions are defined
// (finite) but meaningless; callers ignore them.
#ifndef VIDCLF_MODEL_ATTENTION_ATTENTION_H_
#define VIDCLF_MODEL_ATTENTION_ATTENTION_H_

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace vidclf::model::attention {

// Options of every mechanism; each reads the fields it needs. Defaults follow the seeds (see
// docs/attention.md); a model bundle's JSON overrides them per field.
struct AttentionOptions {
  // A registered mechanism's name (registry.h): "softmax", "causal-linear", ….
  std::string type = "softmax";
  // Width per head of queries and keys (E) and of values (M).
  int64_t head_dim = 64;
  int64_t value_dim = 64;
  int64_t num_heads = 8;
  // Score scale; 0 means 1/sqrt(head_dim) (PyTorch's per-head convention).
  double scale = 0;
  // Longest sequence the mechanism must accept. Linformer's E and F are k x max_length and it
  // refuses longer inputs; cosFormer uses it as alpha (alpha >= max length keeps weights >= 0).
  int64_t max_length = 512;
  // Mechanisms with a causal form (causal-linear always; cosformer when true) let position i see
  // keys j <= i only.
  bool causal = false;
  // Numerical floor added to the denominators of the linear-time mechanisms.
  double epsilon = 1e-6;
  // Seeds the random projections of the clustered mechanisms.
  uint64_t seed = 0;
  // The parameters of particular mechanisms by key (AttentionParameter): Linformer's
  // "linformer_k", the clusters of the clustered ones, …. A key missing here takes its default.
  std::map<std::string, int64_t> parameters;
};

// A parameter that one or more mechanisms read from AttentionOptions::parameters. Mechanisms
// declare theirs as constants beside their code and list them in their AttentionSpec.
struct AttentionParameter {
  const char* key;  // as in model.json's head.attention and vidclf-train's --attention-parameter
  int64_t default_value;
  const char* meaning;
  // What vidclf-train sets for heads trained on clips of tens of frames, where the default (sized
  // for the seeds' long sequences) would exceed the frames and make the approximation exact; 0:
  // the default suits them too.
  int64_t clip_value = 0;
  // The value `options` sets, or the default.
  int64_t Of(const AttentionOptions& options) const;
};

// What a mechanism with a recurrent form carries from one chunk of a stream to the next: the
// kernel sums of causal linear attention, of a size that does not grow with the positions seen.
// Undefined tensors mean nothing seen yet.
struct AttentionState {
  torch::Tensor s;  // [B, H, E, M]: sum of phi(K_j) V_j^T
  torch::Tensor z;  // [B, H, E]: sum of phi(K_j)
};

// Base of all mechanisms. A torch::nn::Module, so mechanisms with learned weights (Linformer's E
// and F) register them and travel with the head's weights.
class AttentionMechanism : public torch::nn::Module {
 public:
  // See the file comment for shapes and the mask's meaning.
  virtual torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys,
                                const torch::Tensor& values,
                                const torch::Tensor& key_padding_mask) = 0;

  // Whether forward_chunk continues a sequence exactly, at a cost per position that does not grow
  // with the positions seen (causal-linear).
  virtual bool has_recurrent_form() const { return false; }

  // Streaming form: queries, keys [B, H, T, E] and values [B, H, T, M] are the next T positions
  // of the sequences whose earlier positions produced `state` (default-constructed for a fresh
  // start; every position is real). Returns this chunk's output [B, H, T, M], equal to forward()
  // over the whole sequence at these positions, and the state to pass with the next chunk.
  // Throws c10::Error unless has_recurrent_form(), or when the state does not fit the input.
  virtual std::pair<torch::Tensor, AttentionState> forward_chunk(const torch::Tensor& queries,
                                                                 const torch::Tensor& keys,
                                                                 const torch::Tensor& values,
                                                                 const AttentionState& state);

  // Whether forward_one_frame_each() steps float32 sequences on the CPU (causal-linear).
  virtual bool has_one_frame_step() const { return false; }

  // forward_chunk() for one new position in each of B sequences with states of their own, as live
  // streams stepped together have them: queries, keys [B, H, E] and values [B, H, M]; states[b]
  // is sequence b's state for a batch of one, default-constructed for a fresh one. Returns the
  // output [B, H, M] and each sequence's next state, equal to forward_chunk's up to rounding,
  // without joining the states into one batch. Throws c10::Error unless has_one_frame_step(), or
  // when a state does not fit.
  virtual std::pair<torch::Tensor, std::vector<AttentionState>> forward_one_frame_each(
      const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
      const std::vector<AttentionState>& states) const;
};

// The score scale `options` asks for: options.scale, or 1/sqrt(head_dim) when it is 0.
double ScoreScale(const AttentionOptions& options);

// Checks the shapes described above; throws c10::Error with a message naming the bad argument.
void CheckAttentionInputs(const torch::Tensor& queries, const torch::Tensor& keys,
                          const torch::Tensor& values, const torch::Tensor& key_padding_mask);

}  // namespace vidclf::model::attention

#endif  // VIDCLF_MODEL_ATTENTION_ATTENTION_H_
