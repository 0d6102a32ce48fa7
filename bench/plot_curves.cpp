// Validation-loss curves of several runs in one SVG (docs/benchmarks.md: "Convergence of the
// weight policies"). Usage: plot_curves OUT.svg TITLE LABEL=RUN_DIR/metrics.jsonl ...
// Prints a markdown table of each run's final validation loss and its perplexity.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/files.h"
#include "io/metrics.h"
#include "io/plot.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: plot_curves OUT.svg TITLE LABEL=metrics.jsonl ...\n");
    return 2;
  }
  const std::vector<std::string> colors = {"#000000", "#1f77b4", "#ff7f0e", "#2ca02c",
                                           "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                           "#7f7f7f", "#17becf"};  // 10 runs, 10 colours
  std::vector<pipetrain::PlotSeries> series;
  std::printf("| run | final validation loss | perplexity | final training loss |\n|---|---|---|---|\n");
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "plot_curves: expected LABEL=PATH, got '%s'\n", arg.c_str());
      return 2;
    }
    pipetrain::PlotSeries s{arg.substr(0, eq), colors[size_t(i - 3) % colors.size()], {}};
    double last_val = NAN, last_loss = NAN;
    for (const auto& record : pipetrain::read_metrics(arg.substr(eq + 1))) {
      last_loss = record["loss"].get<double>();
      if (!record.contains("val_loss")) continue;
      last_val = record["val_loss"].get<double>();
      s.points.emplace_back(record["step"].get<double>(), last_val);
    }
    std::printf("| %s | %.4f | %.3f | %.4f |\n", s.label.c_str(), last_val, std::exp(last_val),
                last_loss);
    series.push_back(std::move(s));
  }
  pipetrain::write_file_atomically(
      argv[1], pipetrain::render_line_plot_svg(series, argv[2], "step", "validation loss (nats/token)"));
  return 0;
}
