#pragma once
// Axis ticks at round numbers (1, 2 or 5 times a power of ten), shared by the loss plots and
// the timeline pictures: a reader should see 200, 400, 600, not 160.8, 320.6.
#include <cmath>
#include <vector>

namespace pipetrain {

// The round step that gives about `ticks` intervals over `span` (> 0).
inline double nice_tick_step(double span, int ticks) {
  const double raw = span / ticks, power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double multiple : {1.0, 2.0, 5.0})
    if (multiple * power >= raw * (1 - 1e-12)) return multiple * power;
  return 10 * power;
}

// Round ticks covering [low, high]: the first at or below low, the last at or above high, so an
// axis drawn from the first to the last tick holds every point and starts and ends on a label.
inline std::vector<double> nice_ticks(double low, double high, int ticks) {
  const double step = nice_tick_step(high - low, ticks);
  std::vector<double> out;
  const double first = std::floor(low / step + 1e-9) * step;
  for (double tick = first; tick < high + step * (1 - 1e-9); tick += step) {
    out.push_back(std::abs(tick) < step * 1e-9 ? 0.0 : tick);  // no "-0" or 1e-17 labels
  }
  return out;
}

}  // namespace pipetrain
