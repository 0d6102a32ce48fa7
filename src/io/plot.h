#pragma once
// Minimal SVG line plots (loss curves): no plotting library needed, opens in any browser.
#include <string>
#include <utility>
#include <vector>

namespace pipetrain {

struct PlotSeries {
  std::string label;
  std::string color;  // any SVG colour
  std::vector<std::pair<double, double>> points;  // (x, y)
};

std::string render_line_plot_svg(const std::vector<PlotSeries>& series, const std::string& title,
                                 const std::string& x_label, const std::string& y_label);

}  // namespace pipetrain
