// SVG drawing of a Timeline (see timeline.h).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/ticks.h"
#include "sim/timeline.h"

namespace pipetrain::sim {
namespace {

constexpr double kLeftPx = 80, kRightPx = 20;  // lane labels; right margin

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// Lightness by kind: forward light, backward darker, weight gradient darkest.
double lightness(const std::string& category) {
  if (category == "Forward") return 72;
  if (category == "BackwardWeight") return 32;
  return 50;  // Backward, BackwardInput
}

std::string fill(const TimedEvent& e) {
  bool compute = e.category == "Forward" || e.category == "Backward" ||
                 e.category == "BackwardInput" || e.category == "BackwardWeight";
  if (!compute || e.microbatch < 0) return "#8c8c8c";
  double hue = std::fmod(e.microbatch * 137.508, 360.0);  // golden angle: neighbours differ
  return fmt::format("hsl({:.0f},70%,{:.0f}%)", hue, lightness(e.category));
}

bool is_transfer(const std::string& category) {
  return category.rfind("Send", 0) == 0 || category.rfind("Recv", 0) == 0;
}

double peak_memory_bytes(const Timeline& t) {
  double most = 0;
  for (const auto& lane : t.events)
    for (const auto& e : lane) most = std::max(most, double(e.memory_peak_bytes));
  return most;
}

// A lane's tensor memory under its actions (a run's trace.json, or a plan's prediction): each
// action's peak over its span, what it left live until the next one; one scale, `most` bytes,
// for every lane.
std::string memory_strip(const std::vector<TimedEvent>& events, double left, double scale,
                         double y, double height, double most) {
  std::vector<const TimedEvent*> measured;
  for (const auto& e : events)
    if (e.memory_peak_bytes >= 0) measured.push_back(&e);
  if (measured.empty()) return "";
  std::sort(measured.begin(), measured.end(),
            [](const TimedEvent* a, const TimedEvent* b) { return a->start_ms < b->start_ms; });
  const double base = y + height;
  const auto level = [&](int64_t bytes) { return base - height * double(bytes) / most; };
  // Steps: what the last action left until the next starts, its peak over its span (cut where the
  // next starts: a simulated send overlaps the actions after it), then what it leaves.
  double x = left + measured.front()->start_ms * scale, y_left = base;
  std::string points = fmt::format("{:.2f},{:.1f}", x, base);
  int64_t lane_peak = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    const TimedEvent* e = measured[i];
    lane_peak = std::max(lane_peak, e->memory_peak_bytes);
    double end_ms = e->start_ms + e->duration_ms;
    if (i + 1 < measured.size()) end_ms = std::min(end_ms, std::max(e->start_ms, measured[i + 1]->start_ms));
    const double x0 = left + e->start_ms * scale, x1 = left + end_ms * scale;
    points += fmt::format(" {0:.2f},{1:.1f} {0:.2f},{2:.1f} {3:.2f},{2:.1f} {3:.2f},{4:.1f}", x0, y_left,
                          level(e->memory_peak_bytes), x1, level(e->memory_live_bytes));
    x = x1, y_left = level(e->memory_live_bytes);
  }
  return fmt::format("<polygon points=\"{} {:.2f},{:.1f}\" fill=\"#c9d9ee\" stroke=\"#4a78b0\" "
                     "stroke-width=\"0.7\"/>\n<text x=\"4\" y=\"{:.1f}\" font-size=\"9\" "
                     "fill=\"#4a78b0\">{:.0f} MiB</text>\n",
                     points, x, base, base - 2, double(lane_peak) / (1024.0 * 1024.0));
}

// Where things go: the plot's left edge and width, its time scale, the lanes' pitch, the memory
// strips' height (0 without memory), the time axis.
struct Frame {
  double left = kLeftPx, top = 36, plot_w = 0, end_ms = 0, scale = 0;
  double strip_h = 0, pitch = 0, axis_y = 0, height = 0, most_memory = 0;

  Frame(const Timeline& t, const SvgOptions& o) {
    const double lane_gap = 6;
    for (const auto& lane : t.events)
      for (const auto& e : lane) end_ms = std::max(end_ms, e.start_ms + e.duration_ms);
    if (end_ms <= 0) end_ms = 1;
    plot_w = o.width_px - left - kRightPx;
    scale = plot_w / end_ms;
    most_memory = peak_memory_bytes(t);
    strip_h = most_memory > 0 ? 30 : 0;  // a memory strip under each lane
    pitch = o.lane_height_px + strip_h + lane_gap;
    axis_y = top + t.lanes.size() * pitch + 4;
    height = axis_y + (strip_h > 0 ? 86 : 70);
  }
};

std::string header_svg(const Timeline& t, const SvgOptions& o, const Frame& f) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "font-family=\"monospace\" font-size=\"11\">\n"
      "<defs><pattern id=\"idle\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f6f6f6\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#dddddd\" stroke-width=\"2\"/>"
      "</pattern></defs>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.0f}\" y=\"20\" font-size=\"14\">{}</text>\n",
      o.width_px, f.height, f.left, escape(t.title));
}

// One action's box on its lane (top at `y`), labelled when the label fits; "" when not drawn.
std::string event_svg(const TimedEvent& e, double y, const SvgOptions& o, const Frame& f) {
  const bool transfer = is_transfer(e.category);
  if ((transfer && !o.show_transfers) || e.duration_ms <= 0) return "";
  const double x = f.left + e.start_ms * f.scale, w = std::max(0.5, e.duration_ms * f.scale);
  const double h = transfer ? 4 : o.lane_height_px, by = transfer ? y + o.lane_height_px - 4 : y;
  std::string svg = fmt::format(
      "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\" "
      "stroke=\"white\" stroke-width=\"0.5\"><title>{} {} {:.3f}+{:.3f} ms</title></rect>\n",
      x, by, w, h, fill(e), escape(e.name), escape(e.category), e.start_ms, e.duration_ms);
  if (!transfer && w >= 7.0 * e.name.size())
    svg += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"{}\">"
                       "{}</text>\n",
                       x + w / 2, y + o.lane_height_px * 0.65,
                       e.category == "Forward" ? "black" : "white", escape(e.name));
  return svg;
}

// A worker's lane: its label, the idle background, its memory strip and its actions.
std::string lane_svg(const Timeline& t, size_t lane, const SvgOptions& o, const Frame& f) {
  const double y = f.top + lane * f.pitch;
  std::string svg = fmt::format(
      "<text x=\"4\" y=\"{:.1f}\">{}</text>\n<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
      "height=\"{:.1f}\" fill=\"url(#idle)\"/>\n",
      y + o.lane_height_px * 0.65, escape(t.lanes[lane]), f.left, y, f.plot_w, o.lane_height_px);
  if (lane >= t.events.size()) return svg;
  if (f.strip_h > 0) {
    svg += memory_strip(t.events[lane], f.left, f.scale, y + o.lane_height_px + 1, f.strip_h - 2, f.most_memory);
  }
  for (const TimedEvent& e : t.events[lane]) svg += event_svg(e, y, o, f);
  return svg;
}

std::string time_axis_svg(const Frame& f) {
  std::string svg = fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                                "stroke=\"black\"/>\n", f.left, f.axis_y, f.left + f.plot_w, f.axis_y);
  const double step = nice_tick_step(f.end_ms, std::max(10, int(f.plot_w / 150)));  // ~150 px apart
  for (double tick = 0; tick <= f.end_ms + 1e-9; tick += step) {
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
                       "stroke=\"black\"/><text x=\"{0:.1f}\" y=\"{3:.1f}\" "
                       "text-anchor=\"middle\">{4:g}</text>\n",
                       f.left + tick * f.scale, f.axis_y, f.axis_y + 4, f.axis_y + 16, tick);
  }
  return svg + fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">time (ms)</text>\n",
                           f.left + f.plot_w, f.axis_y + 30);
}

std::string legend_svg(const Frame& f) {
  double ly = f.axis_y + 44, lx = f.left;
  const std::pair<const char*, std::string> legend[] = {
      {"forward", "hsl(0,70%,72%)"},         {"backward / input grad", "hsl(0,70%,50%)"},
      {"weight grad", "hsl(0,70%,32%)"},     {"update / all-reduce", "#8c8c8c"},
      {"idle", "url(#idle)"}};
  std::string svg;
  for (const auto& [label, colour] : legend) {
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"12\" fill=\"{}\" "
                       "stroke=\"#999\"/><text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                       lx, ly, colour, lx + 18, ly + 10, label);
    lx += 30 + 7.0 * std::string(label).size();
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">hue = microbatch</text>\n", lx, ly + 10);
  if (f.strip_h > 0) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#4a78b0\">under each worker: its tensor "
                       "memory (an action's peak, then what it left live; the worker's peak at the "
                       "left; one scale for all, 0 to {:.0f} MiB)</text>\n",
                       f.left, ly + 28, f.most_memory / (1024.0 * 1024.0));
  }
  return svg;
}

}  // namespace

std::string render_svg(const Timeline& t, const SvgOptions& o) {
  const Frame frame(t, o);
  std::string svg = header_svg(t, o, frame);
  for (size_t lane = 0; lane < t.lanes.size(); ++lane) svg += lane_svg(t, lane, o, frame);
  return svg + time_axis_svg(frame) + legend_svg(frame) + "</svg>\n";
}

double readable_width_px(const Timeline& timeline, double forward_px, double min_px,
                         double max_px) {
  double end_ms = 0;
  for (const auto& lane : timeline.events) {
    for (const TimedEvent& e : lane) end_ms = std::max(end_ms, e.start_ms + e.duration_ms);
  }
  const double forward_ms = median_forward_ms(timeline);
  if (forward_ms <= 0 || end_ms <= 0) return min_px;
  return std::clamp(end_ms / forward_ms * forward_px + kLeftPx + kRightPx, min_px, max_px);
}

}  // namespace pipetrain::sim
