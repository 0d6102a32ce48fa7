#pragma once
// The cluster a command's `--cluster NAME|FILE` names: a file, or clusters/NAME.toml of this
// source tree (plan, profile, terapipe-plan).
#include <string>

#include "plan/cluster.h"

namespace pipetrain::cli {

inline plan::ClusterSpec load_cluster_option(const std::string& name_or_path) {
  return plan::load_cluster(name_or_path, std::string(PIPETRAIN_SOURCE_DIR) + "/clusters");
}

}  // namespace pipetrain::cli
