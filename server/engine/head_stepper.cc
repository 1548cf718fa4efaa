#include "server/engine/head_stepper.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

namespace vidclf::engine {
namespace {

bool SameWindow(const std::optional<model::SlidingWindowOptions>& a,
                const std::optional<model::SlidingWindowOptions>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a.has_value() ||
         (a->window_frames == b->window_frames && a->stride_frames == b->stride_frames);
}

}  // namespace

HeadStepper::HeadStepper(WorkerPool* head_stage, int max_rounds, int max_streams,
                         EngineObserver* observer)
    : head_stage_(head_stage),
      max_rounds_(std::max(1, max_rounds)),
      max_streams_(std::max(1, max_streams)),
      observer_(observer) {}

void HeadStepper::Schedule(std::shared_ptr<Stream> stream) {
  absl::MutexLock lock(&mutex_);
  scheduled_.push_back(std::move(stream));
  StartRounds();
}

void HeadStepper::StartRounds() {
  while (rounds_running_ < max_rounds_ && !scheduled_.empty()) {
    ++rounds_running_;
    head_stage_->Run([this] { Round(); });
  }
}

void HeadStepper::Round() {
  std::vector<std::shared_ptr<Stream>> taken;
  {
    absl::MutexLock lock(&mutex_);
    while (!scheduled_.empty() && static_cast<int>(taken.size()) < max_streams_) {
      taken.push_back(std::move(scheduled_.front()));
      scheduled_.pop_front();
    }
  }
  std::vector<Pending> pending;
  for (std::shared_ptr<Stream>& stream : taken) {
    Step step;
    // A stream with nothing to step leaves the round, and the schedule.
    if (stream->NextStep(&step)) pending.push_back({std::move(stream), std::move(step)});
  }
  std::vector<bool> stepped(pending.size(), false);
  for (size_t first = 0; first < pending.size(); ++first) {
    if (stepped[first]) continue;
    const Step& step = pending[first].step;
    std::vector<Pending*> group;
    for (size_t other = first; other < pending.size(); ++other) {
      const Step& candidate = pending[other].step;
      if (!stepped[other] && candidate.model == step.model &&
          candidate.attention == step.attention && SameWindow(candidate.window, step.window) &&
          candidate.embeddings.size(0) == step.embeddings.size(0)) {
        stepped[other] = true;
        group.push_back(&pending[other]);
      }
    }
    StepTogether(group);
  }
  absl::MutexLock lock(&mutex_);
  // The streams stepped may have more frames: they stay scheduled until NextStep says not.
  for (Pending& p : pending) scheduled_.push_back(std::move(p.stream));
  --rounds_running_;
  StartRounds();
}

void HeadStepper::StepTogether(const std::vector<Pending*>& group) {
  const Step& first = group.front()->step;
  std::vector<torch::Tensor> embeddings;
  std::vector<model::HeadState> states;
  for (const Pending* p : group) {
    for (const model::HeadState& state : p->step.states) {
      embeddings.push_back(p->step.embeddings);
      states.push_back(state);
    }
  }
  auto stepped =
      first.model->StreamStepEach(torch::stack(embeddings), states, first.attention, first.window);
  if (!stepped.ok() && group.size() > 1) {
    for (Pending* p : group) StepTogether({p});
    return;
  }
  observer_->HeadStepped(static_cast<int>(group.size()));
  int64_t row = 0;
  for (Pending* p : group) {
    if (!stepped.ok()) {
      p->stream->Stepped(stepped.status());
      continue;
    }
    const auto rows = static_cast<int64_t>(p->step.states.size());
    std::vector<model::HeadState> next(
        std::make_move_iterator(stepped->second.begin() + row),
        std::make_move_iterator(stepped->second.begin() + row + rows));
    p->stream->Stepped(
        std::make_pair(stepped->first.narrow(/*dim=*/0, row, rows), std::move(next)));
    row += rows;
  }
}

}  // namespace vidclf::engine
