#pragma once
// Timelines of workers, from a simulation or (later) from a real run, and their two pictures:
// Chrome-trace JSON (chrome://tracing, ui.perfetto.dev) and an SVG drawing.
#include <string>
#include <vector>

#include "schedule/schedule.h"
#include "sim/simulator.h"

namespace pipetrain::sim {

struct TimedEvent {
  std::string name;      // short label, e.g. the grid token "1F3"
  std::string category;  // action kind name: "Forward", "Backward", "SendGrad", ...
  double start_ms = 0;
  double duration_ms = 0;
  int microbatch = -1;  // colour key in the SVG; -1 for none
  int step = -1;        // the training step a real run's action belongs to; -1 unknown
  // Tensor bytes: the worker's peak while the action ran and what it left live, as a run counted
  // them (runtime::MemoryWatch) or a plan predicts them (add_simulated_memory); -1 unknown.
  int64_t memory_peak_bytes = -1, memory_live_bytes = -1;
};

struct Timeline {
  std::string title;
  std::vector<std::string> lanes;               // one per worker, e.g. "worker 0"
  std::vector<std::vector<TimedEvent>> events;  // [lane]
};

Timeline timeline_from_simulation(const schedule::Schedule& s, const SimResult& result);
// Gives each event of a timeline_from_simulation its predicted memory: what the simulator holds
// during the action (`held`: held_during_actions per worker) plus its lane's `base_bytes` (what
// the simulator does not place on the timeline: weights, optimizer state).
void add_simulated_memory(Timeline& timeline, const std::vector<std::vector<HeldDuring>>& held,
                          const std::vector<double>& base_bytes);

// {"traceEvents": [...]} with one "X" event per action: pid = lane (a worker is a process in
// the runtime), tid 0, ts/dur in microseconds, plus process_name metadata.
std::string chrome_trace_json(const Timeline& timeline);

// The events of steps [first_step, first_step + steps), shifted to start at 0 ms: a real run's
// picture shows a few steady-state steps at a readable scale (trace.json keeps every step).
// Events without a step are dropped. An empty result if no event falls in the window.
Timeline step_window(const Timeline& timeline, int first_step, int steps);

// The median duration of the timeline's forward actions (0 if it has none).
double median_forward_ms(const Timeline& timeline);

struct SvgOptions {
  double width_px = 1200;
  double lane_height_px = 26;
  bool show_transfers = false;  // draw send/recv as thin bars under the compute boxes
};
// Colour per microbatch; forward light, backward mid, weight-gradient dark; updates grey;
// idle time shows as the striped lane background; memory (TimedEvent::memory_*: a run's, or a
// plan's prediction) as a strip under each lane; time axis in ms; legend at the bottom.
std::string render_svg(const Timeline& timeline, const SvgOptions& options = {});

// A width at which a median forward spans at least `forward_px` pixels (its label fits),
// within [min_px, max_px].
double readable_width_px(const Timeline& timeline, double forward_px = 32, double min_px = 1200,
                         double max_px = 4000);

}  // namespace pipetrain::sim
