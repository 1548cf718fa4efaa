#include "train/training_curves.h"

#include <cairo.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace vidclf::train {
namespace {

struct Series {
  const char* name;
  std::function<double(const model::EpochStats&)> value;
  double r, g, b;
};

struct Panel {
  double x, y, width, height;  // plot area, in pixels
  double low, high;            // value range
};

void Text(cairo_t* cr, double x, double y, const std::string& text, double size = 12) {
  cairo_set_font_size(cr, size);
  cairo_move_to(cr, x, y);
  cairo_show_text(cr, text.c_str());
}

void DrawPanel(cairo_t* cr, const Panel& panel, const std::vector<model::EpochStats>& curves,
               const std::vector<Series>& series, int best_epoch, const std::string& title) {
  const auto epochs = static_cast<double>(std::max<size_t>(curves.size(), 2));
  auto px = [&](double epoch) { return panel.x + (epoch - 1) / (epochs - 1) * panel.width; };
  auto py = [&](double v) {
    return panel.y + panel.height - (v - panel.low) / (panel.high - panel.low) * panel.height;
  };
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, panel.x, panel.y, panel.width, panel.height);
  cairo_stroke(cr);
  Text(cr, panel.x, panel.y - 8, title, 14);
  for (int i = 0; i <= 4; ++i) {
    const double v = panel.low + (panel.high - panel.low) * i / 4;
    cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
    cairo_move_to(cr, panel.x, py(v));
    cairo_line_to(cr, panel.x + panel.width, py(v));
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    Text(cr, panel.x - 44, py(v) + 4, absl::StrFormat("%.2f", v), 11);
  }
  Text(cr, panel.x, panel.y + panel.height + 16, "1", 11);
  Text(cr, panel.x + panel.width / 2 - 16, panel.y + panel.height + 30, "epoch", 12);
  Text(cr, panel.x + panel.width - 16, panel.y + panel.height + 16, absl::StrCat(curves.size()),
       11);
  if (best_epoch > 0) {
    cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
    const double dashes[] = {4, 4};
    cairo_set_dash(cr, dashes, 2, 0);
    cairo_move_to(cr, px(best_epoch), panel.y);
    cairo_line_to(cr, px(best_epoch), panel.y + panel.height);
    cairo_stroke(cr);
    cairo_set_dash(cr, nullptr, 0, 0);
  }
  double legend_y = panel.y + 16;
  for (const Series& s : series) {
    cairo_set_source_rgb(cr, s.r, s.g, s.b);
    cairo_set_line_width(cr, 2);
    for (size_t i = 0; i < curves.size(); ++i) {
      const double v = std::clamp(s.value(curves[i]), panel.low, panel.high);
      if (i == 0) {
        cairo_move_to(cr, px(1), py(v));
      } else {
        cairo_line_to(cr, px(static_cast<double>(i + 1)), py(v));
      }
    }
    cairo_stroke(cr);
    Text(cr, panel.x + panel.width - 150, legend_y, s.name, 11);
    legend_y += 15;
  }
}

}  // namespace

absl::Status WriteCurvesCsv(const std::vector<model::EpochStats>& curves, const std::string& path) {
  std::ofstream out(path);
  out << "epoch,train_loss,train_accuracy,validation_loss,validation_accuracy,"
         "validation_macro_recall,seconds\n";
  for (const model::EpochStats& e : curves) {
    out << absl::StrFormat("%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.3f\n", e.epoch, e.train_loss,
                           e.train_accuracy, e.validation_loss, e.validation_accuracy,
                           e.validation_macro_recall, e.seconds);
  }
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status DrawCurvesPng(const std::vector<model::EpochStats>& curves, int best_epoch,
                           const std::string& title, const std::string& path) {
  constexpr int kWidth = 960;
  constexpr int kHeight = 400;
  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, kWidth, kHeight), &cairo_surface_destroy);
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(cairo_create(surface.get()),
                                                        &cairo_destroy);
  cairo_set_source_rgb(cr.get(), 1, 1, 1);
  cairo_paint(cr.get());
  cairo_select_font_face(cr.get(), "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_source_rgb(cr.get(), 0, 0, 0);
  Text(cr.get(), 20, 24, title, 15);

  double max_loss = 0;
  for (const model::EpochStats& e : curves) {
    max_loss = std::max({max_loss, e.train_loss, e.validation_loss});
  }
  const std::vector<Series> loss = {
      {"training loss", [](const model::EpochStats& e) { return e.train_loss; }, 0.12, 0.47, 0.71},
      {"validation loss", [](const model::EpochStats& e) { return e.validation_loss; }, 1.0, 0.5,
       0.05}};
  const std::vector<Series> scores = {
      {"training accuracy", [](const model::EpochStats& e) { return e.train_accuracy; }, 0.12, 0.47,
       0.71},
      {"validation accuracy", [](const model::EpochStats& e) { return e.validation_accuracy; }, 1.0,
       0.5, 0.05},
      {"validation macro recall",
       [](const model::EpochStats& e) { return e.validation_macro_recall; }, 0.17, 0.63, 0.17}};
  DrawPanel(cr.get(), {60, 60, 380, 290, 0, std::max(max_loss, 1e-3) * 1.05}, curves, loss,
            best_epoch, "loss");
  DrawPanel(cr.get(), {540, 60, 380, 290, 0, 1}, curves, scores, best_epoch,
            "accuracy and macro recall (dashed: kept epoch)");
  cairo_surface_flush(surface.get());
  if (cairo_surface_write_to_png(surface.get(), path.c_str()) != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace vidclf::train
