#include "client/segments_plot.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vidclf::client {
namespace {

struct Colour {
  double r, g, b;
};
// Tableau's ten colours, one per label in order of appearance.
constexpr Colour kPalette[] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17},
                               {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29},
                               {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}, {0.74, 0.74, 0.13},
                               {0.09, 0.75, 0.81}};

void Text(cairo_t* cr, double x, double y, const std::string& text, double size) {
  cairo_set_font_size(cr, size);
  cairo_move_to(cr, x, y);
  cairo_show_text(cr, text.c_str());
}

// A step of 1, 2 or 5 times a power of ten that cuts `span` into at most about 10 ticks.
double TickStep(double span) {
  const double rough = std::max(span, 1e-6) / 10;
  const double power = std::pow(10, std::floor(std::log10(rough)));
  for (const double factor : {1.0, 2.0, 5.0}) {
    if (factor * power >= rough) return factor * power;
  }
  return 10 * power;
}

}  // namespace

absl::Status DrawSegmentsPng(const std::vector<vidclf::v1::SegmentWindow>& windows,
                             const std::vector<vidclf::v1::SegmentEvent>& segments,
                             const std::string& title, const std::string& path) {
  // Labels in order of appearance, windows' first.
  std::map<std::string, int> labels;
  for (const auto& window : windows) {
    for (const auto& score : window.top_k()) labels.emplace(score.label(), labels.size());
  }
  for (const auto& segment : segments) labels.emplace(segment.label(), labels.size());
  double end = 0;
  for (const auto& window : windows) end = std::max(end, window.last_seconds());
  for (const auto& segment : segments) end = std::max(end, segment.end_seconds());
  end = std::max(end, 1.0);

  constexpr double kLeft = 160, kRight = 30, kWidth = 1200, kScoresTop = 50, kScoresHeight = 220;
  constexpr double kRow = 22;
  const double bars_top = kScoresTop + kScoresHeight + 40;
  const double height = bars_top + kRow * static_cast<double>(labels.size()) + 40;
  const double plot_width = kWidth - kLeft - kRight;
  const auto x_of = [&](double seconds) { return kLeft + plot_width * seconds / end; };
  const auto colour_of = [&](const std::string& label) {
    return kPalette[labels.at(label) % std::size(kPalette)];
  };

  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(kWidth),
                                 static_cast<int>(height)),
      &cairo_surface_destroy);
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> owned(cairo_create(surface.get()),
                                                           &cairo_destroy);
  cairo_t* cr = owned.get();
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_source_rgb(cr, 0, 0, 0);
  Text(cr, 20, 28, title, 15);

  // Scores: a frame, grid lines at 0.25, one line per label through its windows' middles (0
  // where a window's top-k leaves it out).
  cairo_set_line_width(cr, 1);
  for (const double score : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    const double y = kScoresTop + kScoresHeight * (1 - score);
    cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
    cairo_move_to(cr, kLeft, y);
    cairo_line_to(cr, kLeft + plot_width, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    Text(cr, kLeft - 40, y + 4, absl::StrFormat("%.2f", score), 11);
  }
  Text(cr, 20, kScoresTop + kScoresHeight / 2, "window scores", 12);
  cairo_set_line_width(cr, 2);
  for (const auto& [label, index] : labels) {
    const Colour colour = colour_of(label);
    cairo_set_source_rgb(cr, colour.r, colour.g, colour.b);
    bool first = true;
    for (const auto& window : windows) {
      double score = 0;
      for (const auto& entry : window.top_k()) {
        if (entry.label() == label) score = entry.score();
      }
      const double x = x_of((window.first_seconds() + window.last_seconds()) / 2);
      const double y = kScoresTop + kScoresHeight * (1 - score);
      if (first) {
        cairo_move_to(cr, x, y);
      } else {
        cairo_line_to(cr, x, y);
      }
      first = false;
    }
    cairo_stroke(cr);
  }

  // Segments: a row per label, its name on the left in its colour.
  for (const auto& [label, index] : labels) {
    const Colour colour = colour_of(label);
    const double y = bars_top + kRow * index;
    cairo_set_source_rgb(cr, colour.r, colour.g, colour.b);
    Text(cr, 20, y + kRow * 0.7, label, 12);
    for (const auto& segment : segments) {
      if (segment.label() != label) continue;
      cairo_rectangle(cr, x_of(segment.start_seconds()), y + 3,
                      x_of(segment.end_seconds()) - x_of(segment.start_seconds()), kRow - 6);
      cairo_fill(cr);
    }
  }

  // The time axis, under the bars.
  const double axis_y = bars_top + kRow * static_cast<double>(labels.size()) + 8;
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  cairo_move_to(cr, kLeft, axis_y);
  cairo_line_to(cr, kLeft + plot_width, axis_y);
  cairo_stroke(cr);
  const double step = TickStep(end);
  for (int tick = 0; tick * step <= end + 1e-9; ++tick) {
    const double t = tick * step;
    cairo_move_to(cr, x_of(t), axis_y);
    cairo_line_to(cr, x_of(t), axis_y + 5);
    cairo_stroke(cr);
    Text(cr, x_of(t) - 10, axis_y + 18, absl::StrFormat("%g s", t), 11);
  }

  cairo_surface_flush(surface.get());
  if (cairo_surface_write_to_png(surface.get(), path.c_str()) != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace vidclf::client
