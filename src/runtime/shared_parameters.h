#pragma once
// Where a model's shared parameters (Model::shared_parameters, e.g. GPT's tied embedding and
// head) live in a pipeline: the workers whose stages hold a copy sum their gradients.
#include <vector>

#include "model/model.h"
#include "runtime/partition.h"
#include "schedule/schedule.h"

namespace pipetrain::runtime {

// Per shared parameter: the distinct workers (0 .. workers - 1, ascending) of one replica's
// pipeline whose stages hold one of its copies' layers (stage s sits on the worker the placement
// gives it: under a V, worker 0 holds both ends).
std::vector<std::vector<int>> workers_holding_shared(const Model& model,
                                                     const std::vector<StageRange>& ranges,
                                                     int workers, schedule::Placement placement);

}  // namespace pipetrain::runtime
