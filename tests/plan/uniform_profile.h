#pragma once
// A measured profile of 6 equal layers: at b = 4, 1 ms forward, 2 ms backward of which 1 ms the
// weight gradient, 1 kB of parameters, stashed activations and output each.
#include "plan/planner.h"

namespace pipetrain::plan {

inline PlanRequest uniform_profile_request() {
  PlanRequest request;
  ModelProfile profile;
  profile.shape = {"uniform", 4, 8, 2, 16, 32};
  for (int i = 0; i < 6; ++i) {
    LayerProfile layer;
    layer.name = "layer" + std::to_string(i);
    layer.param_bytes = 1e3;
    layer.by_microbatch.push_back({4, 1e-3, 2e-3, 1e-3, 1e3, 1e3});
    profile.layers.push_back(layer);
  }
  request.profile = profile;
  request.model = profile.shape;
  return request;
}

}  // namespace pipetrain::plan
