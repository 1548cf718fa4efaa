#include "server/sources/source_fields.h"

#include <cmath>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "media/input_options.h"
#include "media/quoted_text.h"

namespace vidclf::sources {
namespace {

bool IsLabelText(absl::string_view text) {
  if (text.empty() || text.size() > 63) return false;
  for (char c : text) {
    if (!(absl::ascii_islower(static_cast<unsigned char>(c)) ||
          absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status ValidateSourceId(absl::string_view id) {
  bool valid = !id.empty() && id.size() <= kMaxIdLength &&
               absl::ascii_islower(static_cast<unsigned char>(id.front())) && id.back() != '-';
  for (char c : id) {
    valid = valid && (absl::ascii_islower(static_cast<unsigned char>(c)) ||
                      absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-');
  }
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("source_id ", media::QuoteInput(id), " must be 1 to ", kMaxIdLength,
                   " characters of a-z, 0-9 and '-', starting with a letter and not ending "
                   "with '-'"));
}

absl::StatusOr<std::string> IdFromName(absl::string_view name, absl::string_view field) {
  absl::string_view id = name;
  if (!absl::ConsumePrefix(&id, kNamePrefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be \"sources/{source_id}\", not ", media::QuoteInput(name)));
  }
  if (auto status = ValidateSourceId(id); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", status.message()));
  }
  return std::string(id);
}

absl::Status ValidateSourceFields(const vidclf::v1::Source& source) {
  if (source.uri().empty()) return absl::InvalidArgumentError("source.uri is required");
  if (source.uri().size() > 4096) {
    return absl::InvalidArgumentError("source.uri is longer than 4096 characters");
  }
  if (source.labels_size() > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("source.labels: at most ", kMaxLabels, " labels, not ", source.labels_size()));
  }
  for (const auto& [key, value] : source.labels()) {
    if (!IsLabelText(key) || !IsLabelText(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("source.labels: ", media::QuoteInput(key), "=", media::QuoteInput(value),
                       ": keys and values are 1 to 63 characters of a-z, 0-9, '_', '.', '-'"));
    }
  }
  const double stall = source.stall_timeout_seconds();
  if (!(stall >= 0) || stall > kMaxStallTimeoutSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("source.stall_timeout_seconds must be in [0, ",
                                                   kMaxStallTimeoutSeconds, "], not ", stall));
  }
  const double interval = source.checkpoint_interval_seconds();
  if (!(interval >= 0) || interval > kMaxCheckpointIntervalSeconds) {
    return absl::InvalidArgumentError(
        absl::StrCat("source.checkpoint_interval_seconds must be in [0, ",
                     kMaxCheckpointIntervalSeconds, "], not ", interval));
  }
  const double gap = source.max_resume_gap_seconds();
  if (!(gap >= 0) || gap > kMaxResumeGapSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("source.max_resume_gap_seconds must be in [0, ",
                                                   kMaxResumeGapSeconds, "], not ", gap));
  }
  const media::InputOptions options(source.input_options().begin(), source.input_options().end());
  if (auto status = media::ValidateInputOptions(options, source.uri()); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("source.", status.message()));
  }
  return absl::OkStatus();
}

absl::Duration StallTimeoutOf(const vidclf::v1::Source& source) {
  return source.stall_timeout_seconds() > 0 ? absl::Seconds(source.stall_timeout_seconds())
                                            : kDefaultStallTimeout;
}

bool SourceFilter::Matches(const vidclf::v1::Source& source) const {
  if (state.has_value() && source.status().state() != *state) return false;
  for (const auto& [key, value] : labels) {
    const auto found = source.labels().find(key);
    if (found == source.labels().end() || found->second != value) return false;
  }
  return true;
}

absl::StatusOr<SourceFilter> ParseFilter(absl::string_view filter) {
  SourceFilter parsed;
  if (absl::StripAsciiWhitespace(filter).empty()) return parsed;
  for (absl::string_view term : absl::StrSplit(filter, " AND ")) {
    term = absl::StripAsciiWhitespace(term);
    const std::pair<absl::string_view, absl::string_view> sides = absl::StrSplit(term, '=');
    const absl::string_view key = absl::StripAsciiWhitespace(sides.first);
    const absl::string_view value = absl::StripAsciiWhitespace(sides.second);
    absl::string_view label = key;
    vidclf::v1::SourceStatus::State state;
    if (key == "state" && vidclf::v1::SourceStatus::State_Parse(std::string(value), &state)) {
      parsed.state = state;
    } else if (absl::ConsumePrefix(&label, "labels.") && IsLabelText(label) && IsLabelText(value)) {
      parsed.labels.emplace_back(label, value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "filter: ", media::QuoteInput(term),
          " is not \"state=STATE\" (CONNECTING, LIVE, STALLED, BACKING_OFF, FAILED, PAUSED) or "
          "\"labels.KEY=VALUE\"; terms are joined by \" AND \""));
    }
  }
  return parsed;
}

}  // namespace vidclf::sources
