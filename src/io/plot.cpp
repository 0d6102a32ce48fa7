#include "io/plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/ticks.h"

namespace pipetrain {
namespace {

constexpr double kWidth = 760, kHeight = 420;
constexpr size_t kMarkedPointsMax = 40;
constexpr double kLeft = 70, kRight = 200, kTop = 40, kBottom = 50;  // right: the legend

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  void include(double v) {
    if (!std::isfinite(v)) return;
    low = std::min(low, v);
    high = std::max(high, v);
  }
  void settle() {
    if (!std::isfinite(low)) low = 0, high = 1;
    if (high - low < 1e-12) high = low + 1;
  }
};

// The plot area: axes spanning whole round ticks (so every gridline carries a round label), and
// data coordinates to pixels.
struct Frame {
  std::vector<double> x_ticks, y_ticks;
  Range xs, ys;
  double width = kWidth - kLeft - kRight, height = kHeight - kTop - kBottom;

  explicit Frame(const std::vector<PlotSeries>& series) {
    for (const auto& s : series) {
      for (const auto& [x, y] : s.points) xs.include(x), ys.include(y);
    }
    xs.settle();
    ys.settle();
    x_ticks = nice_ticks(xs.low, xs.high, 6);
    y_ticks = nice_ticks(ys.low, ys.high, 5);
    xs.low = x_ticks.front(), xs.high = x_ticks.back();
    ys.low = y_ticks.front(), ys.high = y_ticks.back();
  }
  double px(double x) const { return kLeft + (x - xs.low) / (xs.high - xs.low) * width; }
  double py(double y) const { return kTop + (1 - (y - ys.low) / (ys.high - ys.low)) * height; }
};

// Gridlines with their labels, the frame, and the axis labels.
std::string axes_svg(const Frame& f, const std::string& x_label, const std::string& y_label) {
  std::string svg;
  for (double fy : f.y_ticks) {
    svg += fmt::format(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
        kLeft, kLeft + f.width, f.py(fy), kLeft - 6, f.py(fy) + 4, fy);
  }
  for (double fx : f.x_ticks) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        f.px(fx), kTop, kTop + f.height, kTop + f.height + 16, fx);
  }
  return svg + fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
      "<text transform=\"translate(18,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      kLeft, kTop, f.width, f.height, kLeft + f.width / 2, kHeight - 10, escape_xml(x_label),
      kTop + f.height / 2, escape_xml(y_label));
}

// A series' line, its markers when sparse, and its legend entry (the index-th).
std::string series_svg(const Frame& f, const PlotSeries& s, size_t index) {
  std::string points;
  for (const auto& [x, y] : s.points) {
    if (std::isfinite(y)) points += fmt::format("{:.1f},{:.1f} ", f.px(x), f.py(y));
  }
  std::string svg = fmt::format(
      "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" points=\"{}\"/>\n", s.color, points);
  // Sparse series (validation every 100 steps, or a single final value) also get markers:
  // a line through one point draws nothing.
  if (s.points.size() <= kMarkedPointsMax) {
    for (const auto& [x, y] : s.points) {
      if (std::isfinite(y))
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", f.px(x),
                           f.py(y), s.color);
    }
  }
  const double ly = kTop + 16 + 20 * static_cast<double>(index);
  return svg + fmt::format(
      "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"3\"/>"
      "<text x=\"{4}\" y=\"{5}\">{6}</text>\n",
      kLeft + f.width + 12, kLeft + f.width + 32, ly, s.color, kLeft + f.width + 38, ly + 4,
      escape_xml(s.label));
}

}  // namespace

std::string render_line_plot_svg(const std::vector<PlotSeries>& series, const std::string& title,
                                 const std::string& x_label, const std::string& y_label) {
  const Frame frame(series);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"{}\" y=\"24\" font-size=\"15\">{}</text>\n",
      kWidth, kHeight, kLeft, escape_xml(title));
  svg += axes_svg(frame, x_label, y_label);
  for (size_t i = 0; i < series.size(); ++i) svg += series_svg(frame, series[i], i);
  return svg + "</svg>\n";
}

}  // namespace pipetrain
