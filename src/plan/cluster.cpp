#include "plan/cluster.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/files.h"
#include "core/toml_parse.h"
#include "plan/profile_json.h"

namespace pipetrain::plan {
namespace {

double number(const toml::table& table, const char* key, double fallback, double minimum,
              const std::string& origin) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return fallback;
  double value = 0;
  if (node->is_integer()) {
    value = static_cast<double>(node->as_integer()->get());
  } else if (node->is_floating_point()) {
    value = node->as_floating_point()->get();
  } else {
    fail("{}: {} must be a number", origin, key);
  }
  if (!(value >= minimum)) fail("{}: {} must be >= {:g}, got {:g}", origin, key, minimum, value);
  return value;
}

}  // namespace

double small_gemm_share(double tokens, double half_tokens) {
  return tokens > 0 ? tokens / (tokens + half_tokens) : 1;
}

double ClusterSpec::sustained_flops(double tokens) const {
  return device_flops * compute_efficiency * small_gemm_share(tokens, half_efficiency_tokens);
}

ClusterSpec parse_cluster_toml(const std::string& text, const std::string& origin) {
  const toml::table root = parse_toml_or_fail(text, origin);
  static const char* known[] = {"name", "description", "nodes", "devices_per_node",
                                "device_memory_gb", "device_tflops", "compute_efficiency", "half_efficiency_tokens",
                                "bytes_per_value", "intra_node_gbps", "intra_node_latency_us",
                                "inter_node_gbps", "inter_node_latency_us", "cores_per_node",
                                "worker_overhead_gb", "memory_bandwidth_gb_s", "operator_us", "launch_us",
                                "device"};
  for (const auto& [key, node] : root) {
    if (std::find(std::begin(known), std::end(known), key.str()) == std::end(known)) {
      fail("{}: unknown cluster field '{}'", origin, key.str());
    }
  }
  // A description that sets nothing (an empty file) would plan for made-up hardware.
  if (std::none_of(root.begin(), root.end(), [](const auto& field) {
        return field.first.str() != "name" && field.first.str() != "description";
      })) {
    fail("{}: describes no hardware (set nodes, devices_per_node, device_memory_gb, device_tflops, "
         "...: docs/planning.md)", origin);
  }
  ClusterSpec c;
  c.name = root["name"].value_or(std::string("unnamed"));
  c.description = root["description"].value_or(std::string());
  c.nodes = static_cast<int>(number(root, "nodes", 1, 1, origin));
  c.devices_per_node = static_cast<int>(number(root, "devices_per_node", 1, 1, origin));
  c.device_memory_bytes = number(root, "device_memory_gb", 16, 1e-3, origin) * 1e9;
  c.device_flops = number(root, "device_tflops", 125, 1e-6, origin) * 1e12;
  c.compute_efficiency = number(root, "compute_efficiency", 0.5, 1e-3, origin);
  if (c.compute_efficiency > 1) fail("{}: compute_efficiency must be <= 1", origin);
  c.half_efficiency_tokens = number(root, "half_efficiency_tokens", 256, 0, origin);
  c.bytes_per_value = number(root, "bytes_per_value", 2, 1, origin);
  // Device memory in gigabytes per second, as vendors quote it (links below: gigabits).
  c.memory_bandwidth = number(root, "memory_bandwidth_gb_s", 0, 0, origin) * 1e9;
  c.operator_s = number(root, "operator_us", 0, 0, origin) * 1e-6;
  c.launch_s = number(root, "launch_us", 0, 0, origin) * 1e-6;
  // Links are given in gigabits per second, as vendors quote them.
  c.intra_node_bandwidth = number(root, "intra_node_gbps", 1200, 1e-3, origin) * 1e9 / 8;
  c.intra_node_latency_s = number(root, "intra_node_latency_us", 5, 0, origin) * 1e-6;
  c.inter_node_bandwidth = number(root, "inter_node_gbps", 25, 1e-3, origin) * 1e9 / 8;
  c.inter_node_latency_s = number(root, "inter_node_latency_us", 20, 0, origin) * 1e-6;
  c.cores_per_node = static_cast<int>(number(root, "cores_per_node", 0, 0, origin));
  c.worker_overhead_bytes = number(root, "worker_overhead_gb", 0, 0, origin) * 1e9;
  const std::string device = root["device"].value_or(std::string(c.cores_per_node > 0 ? "cpu" : "gpu"));
  if (device != "gpu" && device != "cpu") fail("{}: device must be \"gpu\" or \"cpu\", got \"{}\"", origin, device);
  c.gpus = device == "gpu";
  return c;
}

ClusterSpec load_cluster(const std::string& name_or_path, const std::string& clusters_dir) {
  std::string path = name_or_path;
  if (!std::filesystem::exists(path)) {
    path = (std::filesystem::path(clusters_dir) / (name_or_path + ".toml")).string();
    if (!std::filesystem::exists(path)) {
      fail("cluster '{}' not found (neither a file nor {}/<name>.toml)", name_or_path, clusters_dir);
    }
  }
  return parse_cluster_toml(read_file(path), path);
}

}  // namespace pipetrain::plan

namespace pipetrain::plan {

void use_measured_links(ClusterSpec& cluster, const LinkProfile& links) {
  if (!links.measured) return;
  cluster.intra_node_bandwidth = cluster.inter_node_bandwidth = links.p2p.bandwidth;
  cluster.intra_node_latency_s = cluster.inter_node_latency_s = links.p2p.latency_s;
  cluster.measured_allreduce_bandwidth = links.all_reduce.bandwidth;
  // The planner's ring model charges 2 (w - 1) latencies: w = 2 gives the measured latency.
  cluster.measured_allreduce_latency_s = links.all_reduce.latency_s / 2;
  cluster.measured_send_post_latency_s = links.send_post.latency_s;
  cluster.measured_send_post_bandwidth = links.send_post.bandwidth;
}

}  // namespace pipetrain::plan
