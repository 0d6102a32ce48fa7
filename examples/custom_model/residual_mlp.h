#pragma once
// A model of your own, trained by pipetrain: a residual MLP classifier on synthetic data.
//
// Layers (each a place the pipeline may cut): "input" (features -> width), model.layers
// residual blocks x + W2 tanh(W1 x), "head" (width -> classes). Width is model.d_model. The data
// (data.format "teacher") are Gaussian feature vectors labelled by a fixed random linear teacher,
// a pure function of (seed, step): every worker draws the same batch without sharing anything.
#include "pipetrain.h"

namespace residual_mlp {

constexpr int64_t kFeatures = 8;
constexpr int64_t kClasses = 4;

// model.kind "mlp" and data.format "teacher", for a program to call before pipetrain::run_cli.
void register_with_pipetrain();

}  // namespace residual_mlp
