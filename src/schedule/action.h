#pragma once
// One step of one worker in a pipeline schedule. A Schedule is, per worker, an ordered list of
// these; the validator, simulator, renderers and the runtime all walk the same lists.
#include <string>
#include <string_view>

namespace pipetrain::schedule {

enum class ActionKind {
  Forward,         // forward of (microbatch, slice) through the worker's chunk
  Backward,        // full backward: input gradient and weight gradient together
  BackwardInput,   // zero-bubble split: gradient w.r.t. the chunk's input only
  BackwardWeight,  // zero-bubble split: gradient w.r.t. the chunk's weights
  SendActivation,  // output of the local stage -> next stage's worker (peer)
  RecvActivation,  // input of the local stage <- previous stage's worker (peer)
  SendGrad,        // gradient w.r.t. the local stage's input -> previous stage's worker
  RecvGrad,        // gradient w.r.t. the local stage's output <- next stage's worker
  AllReduceGrads,  // sum the chunk's gradients over the dp_width replicas of this worker
  OptimizerStep,   // apply the accumulated gradients of the chunk: produces a new version
};

inline constexpr int kActionKindCount = 10;

// Long name ("Forward") and short grid token ("F") of a kind, and the reverse of the long name.
std::string_view kind_name(ActionKind kind);
std::string_view kind_token(ActionKind kind);
bool parse_kind(std::string_view name, ActionKind* kind);

bool is_compute(ActionKind kind);  // Forward and the three backward kinds
bool is_comm(ActionKind kind);     // the four send/recv kinds
bool is_send(ActionKind kind);
bool is_recv(ActionKind kind);
// The kind that completes a (microbatch, slice) on a stage and frees its activations.
bool is_gradient_producer(ActionKind kind);  // Backward or BackwardWeight

struct Action {
  ActionKind kind = ActionKind::Forward;
  int iteration = 0;   // training iteration (weight-update group for 2BW)
  int microbatch = 0;  // index inside the iteration, 0..m-1
  int slice = 0;       // token slice of the microbatch, 0..slices-1 (TeraPipe)
  int chunk = 0;       // model chunk on this worker; pipeline stage = chunk * workers + worker
  // Compute: the weight version read (number of optimizer steps applied to this stage before
  // it). OptimizerStep: the version it produces. Send/recv/all-reduce: unused (-1).
  int version = -1;
  int peer = -1;  // send/recv: the other worker; -1 otherwise

  bool operator==(const Action& other) const;
  bool operator!=(const Action& other) const { return !(*this == other); }
};

}  // namespace pipetrain::schedule
