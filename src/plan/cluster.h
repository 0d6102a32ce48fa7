#pragma once
// A cluster description (TOML, see clusters/*.toml): what the planner and the analytic profile
// need to know about the devices and the links between them.
#include <string>

namespace pipetrain::plan {

struct ClusterSpec {
  std::string name;
  std::string description;
  int nodes = 1;
  int devices_per_node = 1;
  double device_memory_bytes = 16e9;
  double device_flops = 125e12;       // peak for the training dtype
  double compute_efficiency = 0.5;    // share of peak large transformer GEMMs reach
  // Small GEMMs underuse a device: with n tokens in flight the share is
  // compute_efficiency * small_gemm_share(n, half_efficiency_tokens); bench/device_rates measures it.
  double half_efficiency_tokens = 256;
  double bytes_per_value = 2;         // 2: fp16/bf16 mixed precision, 4: fp32
  // Device memory bytes/s (an H200's HBM: 4.8e12); 0 = not given: a `--config` plan takes one
  // CPU core's, scaled by the device's compute rate (runtime::ModelCostOptions).
  double memory_bandwidth = 0;
  // An operator's fixed cost where it runs, however little it does (a CPU's dispatch, a GPU
  // kernel's minimum), and the host's time to issue one to an asynchronous device (a GPU run
  // eagerly: none with train.cuda_graphs, which launches a whole graph): a `--config` plan's layer
  // pass takes max(its work + operators x operator_s, operators x launch_s); bench/device_rates.
  double operator_s = 0, launch_s = 0;
  // The devices are GPUs (`device = "gpu"`), or CPU cores (`"cpu"`; the default where
  // cores_per_node is given): where a layer's work differs by device (the GPT head's fused loss
  // kernels, LayerWork::on_gpu), a `--config` plan takes theirs.
  bool gpus = true;
  double intra_node_bandwidth = 150e9;  // bytes/s per device (NVLink)
  double intra_node_latency_s = 5e-6;
  double inter_node_bandwidth = 3.125e9;  // bytes/s per node (25 Gbps)
  double inter_node_latency_s = 20e-6;
  // A measured all-reduce inside a node (0: derive it from the intra-node link).
  double measured_allreduce_bandwidth = 0, measured_allreduce_latency_s = 0;
  // Workers that share a node's CPU cores (this machine): 0 = every device computes on its own.
  // With fewer workers than cores each worker gets several threads; with more, they take turns.
  int cores_per_node = 0;
  // Resident memory a worker process holds beyond its tensors (the libraries, the allocator's
  // slack): counted against device memory once per worker.
  double worker_overhead_bytes = 0;
  // From a measured profile: the sender's own time per send (0: free; see sim::CostModel).
  double measured_send_post_latency_s = 0, measured_send_post_bandwidth = 0;

  int devices() const { return nodes * devices_per_node; }
  double sustained_flops(double tokens) const;
};

// The share of its rate for large products a device reaches when they run over `tokens` rows:
// tokens / (tokens + half_tokens); 0 tokens: many (1).
double small_gemm_share(double tokens, double half_tokens);

struct LinkProfile;
// The node's links as `pipetrain profile` measured them (this machine's workers talk over
// loopback, so intra- and inter-node links are the same measured one).
void use_measured_links(ClusterSpec& cluster, const LinkProfile& links);

ClusterSpec parse_cluster_toml(const std::string& text, const std::string& origin);
// `name_or_path`: a .toml path, or a name looked up as <clusters_dir>/<name>.toml.
ClusterSpec load_cluster(const std::string& name_or_path, const std::string& clusters_dir);

}  // namespace pipetrain::plan
