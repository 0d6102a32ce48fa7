#pragma once
// Text forms of a Schedule.
//
// Grid (for people): one row per worker, "w1: 1F0 1F1 1B0 ...". A token is
//   <stage><kind><microbatch>[.<slice>]
// with stage the pipeline stage (Schedule::stage_of: chunk * workers + worker when looping), kind F forward, B backward,
// I backward-input, W backward-weight, SA/RA send/recv activation, SG/RG send/recv gradient,
// and the microbatch counted across iterations (iteration * m + index). Updates print as
// <stage>AR (gradient all-reduce) and <stage>OPT<version produced>. With versions on, compute
// tokens end in v<version read>, e.g. "0F5v1".
//
// CSV (for programs; lossless): '#' metadata lines, a header, then one action per line:
//   # pipetrain-schedule v1
//   # name=2bw workers=4 chunks=1 microbatches=8 slices=1 iterations=1 dp_width=1
//   # policy=double_buffer predict_backward=0 placement=looping
//   worker,kind,iteration,microbatch,slice,chunk,version,peer
//   0,Forward,0,0,0,0,0,-1
// A worker's actions are in file order. Errors are UserError naming the line.
#include <iosfwd>
#include <string>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct GridOptions {
  bool show_transfers = false;  // also print send/recv/all-reduce/optimizer tokens
  bool show_versions = false;
  int mark_worker = -1;  // wrap this action in >> << (implies show_transfers)
  int mark_position = -1;
};

std::string action_token(const Schedule& schedule, int worker, const Action& action,
                         bool show_versions = false);
std::string format_grid(const Schedule& schedule, const GridOptions& options = {});

std::string to_csv(const Schedule& schedule);
// Never crashes on garbage: every problem is a UserError "line N: ...". Structural sanity only;
// run validate() for the schedule rules.
Schedule parse_csv(const std::string& text);

}  // namespace pipetrain::schedule
