#include "profile/link_profile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <torch/torch.h>

#include "core/error.h"
#include "profile/layer_profile.h"
#include "runtime/comm.h"

namespace pipetrain::profile {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kTimeout{60000};
// 4 KiB .. 16 MiB: from latency-bound to bandwidth-bound (activations here are ~0.25-4 MiB).
const std::vector<int64_t> kSizes = {1 << 10, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22};

// What each of the two ranks does; rank 0 records the samples.
void run_rank(int rank, int port, int repeats, std::vector<LinkSample>* p2p,
              std::vector<LinkSample>* all_reduce, std::vector<LinkSample>* send_post) {
  torch::set_num_threads(1);
  runtime::WorkerEnvironment env;
  env.rank = rank;
  env.world_size = 2;
  env.master_port = port;
  env.store_hosted_elsewhere = true;
  runtime::Comm comm(env, kTimeout);
  const int peer = 1 - rank;
  for (int64_t floats : kSizes) {
    auto tensor = torch::ones({floats});
    std::vector<double> round_trips, reductions, posts;
    for (int i = 0; i <= repeats; ++i) {  // the first of each is a warm-up
      double post = 0;
      comm.barrier();
      const auto start = Clock::now();
      if (rank == 0) {
        comm.send(tensor, peer, 0);
        post = std::chrono::duration<double>(Clock::now() - start).count();
        comm.wait_sends();
        comm.recv({floats}, torch::kFloat32, peer, 1);
      } else {
        auto back = comm.recv({floats}, torch::kFloat32, peer, 0);
        comm.send(back, peer, 1);
        comm.wait_sends();
      }
      const double round_trip = std::chrono::duration<double>(Clock::now() - start).count();
      comm.barrier();
      const auto reduce_start = Clock::now();
      comm.all_reduce_sum(tensor, runtime::Comm::kWorld);
      const double reduce = std::chrono::duration<double>(Clock::now() - reduce_start).count();
      if (i > 0) round_trips.push_back(round_trip), reductions.push_back(reduce), posts.push_back(post);
    }
    if (rank == 0) {
      const double bytes = 4.0 * double(floats);
      p2p->push_back({bytes, median_of(round_trips) / 2});
      all_reduce->push_back({bytes, median_of(reductions)});
      send_post->push_back({bytes, median_of(posts)});
    }
  }
}

}  // namespace

plan::LinkFit fit_link(const std::vector<LinkSample>& samples) {
  if (samples.size() < 2) fail("a link fit needs at least two transfer sizes");
  // Weighted by 1 / time^2: minimises relative error, so small transfers (latency) count as
  // much as large ones (bandwidth).
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& s : samples) {
    const double w = 1 / (s.seconds * s.seconds);
    n += w, sx += w * s.bytes, sy += w * s.seconds;
    sxx += w * s.bytes * s.bytes, sxy += w * s.bytes * s.seconds;
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  plan::LinkFit fit;
  fit.latency_s = std::max(0.0, (sy - slope * sx) / n);
  fit.bandwidth = slope > 0 ? 1 / slope : INFINITY;
  for (const auto& s : samples) {
    const double predicted = fit.latency_s + s.bytes / fit.bandwidth;
    fit.max_error = std::max(fit.max_error, std::abs(predicted / s.seconds - 1));
  }
  return fit;
}

plan::LinkProfile measure_local_links(int repeats) {
  runtime::StoreHost store("127.0.0.1", 0, kTimeout);
  std::vector<LinkSample> p2p, all_reduce, send_post;
  std::exception_ptr peer_error;
  std::thread peer([&] {
    try {
      run_rank(1, store.port(), repeats, nullptr, nullptr, nullptr);
    } catch (...) {
      peer_error = std::current_exception();
    }
  });
  try {
    run_rank(0, store.port(), repeats, &p2p, &all_reduce, &send_post);
  } catch (...) {
    peer.join();
    throw;
  }
  peer.join();
  if (peer_error) std::rethrow_exception(peer_error);
  return {true, fit_link(p2p), fit_link(all_reduce), fit_link(send_post)};
}

}  // namespace pipetrain::profile
