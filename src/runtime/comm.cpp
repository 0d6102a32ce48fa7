#include "runtime/comm.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <c10/util/Logging.h>

#include "core/error.h"
#include "core/stop_signal.h"
#include "device/placement.h"
#include "runtime/comm_nccl.h"

namespace pipetrain::runtime {
namespace {

std::string first_line(const std::exception& error) {
  std::string message = error.what();
  return message.substr(0, message.find('\n'));  // libtorch appends a backtrace
}

// The interface Gloo binds: GLOO_SOCKET_IFNAME if set (as in PyTorch); on one machine the
// loopback of the rendezvous address; across machines the interface of this host's name.
std::shared_ptr<gloo::transport::Device> gloo_device(const std::string& master_addr) {
  if (const char* name = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(name);
  }
  if (is_loopback_address(master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname(master_addr);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// c10d logs each failed connection attempt before it throws; the exception is what we report
// (one line), so only fatal messages get through unless TORCH_CPP_LOG_LEVEL asks for more
// (libtorch reads that variable when it loads, into the flag set here).
void quiet_c10d_logging() {
  if (std::getenv("TORCH_CPP_LOG_LEVEL") == nullptr) FLAGS_caffe2_log_level = 3;  // FATAL
}

c10::intrusive_ptr<c10d::Store> open_store(const WorkerEnvironment& env,
                                           std::chrono::milliseconds timeout) {
  if (!env.store_file.empty()) {
    auto store = c10::make_intrusive<c10d::FileStore>(env.store_file, env.world_size);
    store->setTimeout(timeout);
    return store;
  }
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = env.rank == 0 && !env.store_hosted_elsewhere;
  options.numWorkers = env.world_size;
  options.waitWorkers = false;
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
}

// Every member of a group checks in on its store before the group forms, and waits for the
// others in short polls: c10d's own wait would hold a worker whose peer never comes (it failed
// before joining, under torchrun or on another node, where no launcher of ours kills the rest)
// for the whole timeout, deaf to a stop signal. After a stop the wait goes on for a quarter of
// the timeout at most (30 s): a peer still starting arrives meanwhile, and the run then stops at
// its first step with a checkpoint, as a stop while the workers start does.
void await_members(c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout,
                   const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const std::string key = "pipetrain-joined";
  int64_t joined = store.add(key, 1);
  const auto start = Clock::now();
  const auto grace = std::min<std::chrono::milliseconds>(timeout / 4, std::chrono::seconds(30));
  std::optional<Clock::time_point> stopped_at;
  auto pause = std::chrono::milliseconds(1);
  while (joined < size) {
    const auto now = Clock::now();
    if (now - start > timeout) {
      throw std::runtime_error(fmt::format("{} of {} workers joined {}", joined, size, what));
    }
    if (stop_signal() != 0 && !stopped_at) stopped_at = now;
    if (stopped_at && now - *stopped_at > grace) {
      fail("rank {}: stopped by {} while {} of {} workers had joined {}; they did not join within "
           "{} s of it, so nothing was trained", rank, stop_signal_name(stop_signal()), joined,
           size, what, grace.count() / 1000.0);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(2 * pause, std::chrono::milliseconds(20));
    joined = store.add(key, 0);
  }
}

}  // namespace

struct StoreHost::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

StoreHost::StoreHost(const std::string& addr, int port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  quiet_c10d_logging();
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);  // 0: the OS picks a free one, no collisions
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(addr, options);
  } catch (const std::exception& error) {
    fail("cannot host the rendezvous store on {}:{}: {}", addr, port, first_line(error));
  }
}

StoreHost::~StoreHost() = default;
int StoreHost::port() const { return impl_->store->getPort(); }

struct Comm::Impl {
  int rank = 0, world = 1;
  CommDevice device;
  // Gloo's send/recv refuse GPU tensors ("writev ... Bad address"): host-staged transport
  // copies them to the host before a send and back after a receive. (Its all-reduce and
  // all-gather take them as they are.)
  bool staged() const { return device.transport == device::Transport::GlooHostStaged; }
  std::chrono::milliseconds timeout;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> options;  // Gloo transports
  c10::intrusive_ptr<c10d::Backend> group;
  struct SubGroup {
    std::string name;
    c10::intrusive_ptr<c10d::Backend> group;
  };
  std::vector<SubGroup> subgroups;
  // Work in flight with the tensor it reads or fills: a send (`peer`: the receiver), a posted
  // receive (the sender) or a posted reduction (the group handle).
  struct Posted {
    at::Tensor tensor;
    c10::intrusive_ptr<c10d::Work> work;
    int peer;
    at::Tensor reduced;  // a reduction's device copy of a host `tensor` (NCCL), else `tensor`
  };
  std::map<int64_t, Posted> pending;  // sends, by ticket (the order they were posted in)
  int64_t next_send_ticket = 0;
  std::map<int, Posted> posted;
  int next_recv_handle = 0;
  // Reductions are posted and waited for from two threads (an update's helper thread posts its
  // norm, stage_executor.h), each on its own groups: the handle table is guarded.
  std::mutex reductions_mutex;
  std::map<int, Posted> reductions;
  int next_reduce_handle = 0;

  bool nccl() const { return device.transport == device::Transport::Nccl; }
  // The transport's backend over `store` (a group's prefixed one) for `size` ranks.
  c10::intrusive_ptr<c10d::Backend> make_group(const c10::intrusive_ptr<c10d::Store>& on, int me,
                                               int size) const {
    if (nccl()) return make_nccl_backend(on, me, size, timeout, device.device);
    return c10::make_intrusive<c10d::ProcessGroupGloo>(on, me, size, options);
  }
  // NCCL reduces device tensors only: a host value (a vote, a norm, a memory table) goes to the
  // device for the collective and comes back after it. Gloo takes either.
  at::Tensor for_collective(const at::Tensor& tensor) const {
    return nccl() ? device::to_device(tensor, device.device) : tensor;
  }

  c10d::Backend& of(int handle) const {
    return handle == kWorld ? *group : *subgroups.at(size_t(handle)).group;
  }
  std::string label(int handle) const {
    return handle == kWorld ? "all-reduce" : subgroups.at(size_t(handle)).name + " all-reduce";
  }

  [[noreturn]] void lost(const std::string& what, int peer, const std::exception& error) const {
    fail("rank {}: {} {} {} {} s timeout passed): {}", rank, what,
         peer >= 0 ? fmt::format("with rank {}", peer) : std::string("across ranks"), kLostPeerMessage,
         timeout.count() / 1000, first_line(error));
  }
};

Comm::Comm(const WorkerEnvironment& env, std::chrono::milliseconds timeout, CommDevice device)
    : impl_(std::make_unique<Impl>()) {
  quiet_c10d_logging();
  impl_->device = device;
  impl_->rank = env.rank;
  impl_->world = env.world_size;
  impl_->timeout = timeout;
  try {
    impl_->store = open_store(env, timeout);
    impl_->options = c10d::ProcessGroupGloo::Options::create(timeout);
    impl_->options->devices.push_back(gloo_device(env.master_addr));
    await_members(*impl_->store, env.rank, env.world_size, timeout, "the run");
    impl_->group = impl_->make_group(impl_->store, env.rank, env.world_size);
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& error) {
    fail("rank {}: rendezvous at {} failed within {} s: {}", env.rank,
         env.store_file.empty() ? fmt::format("{}:{}", env.master_addr, env.master_port) : env.store_file,
         timeout.count() / 1000, first_line(error));
  }
}

Comm::~Comm() = default;
int Comm::rank() const { return impl_->rank; }
int Comm::world_size() const { return impl_->world; }

int64_t Comm::send(const at::Tensor& tensor, int peer, int tag) {
  const at::Tensor data = impl_->staged() ? device::to_host(tensor.detach()) : tensor.detach();
  std::vector<at::Tensor> tensors{data.contiguous()};
  try {
    auto work = impl_->group->send(tensors, peer, tag);
    impl_->pending[impl_->next_send_ticket] = {tensors[0], work, peer, {}};
  } catch (const std::exception& error) {
    impl_->lost("send", peer, error);
  }
  return impl_->next_send_ticket++;
}

void Comm::wait_sends() { wait_sends_before(impl_->next_send_ticket); }

int64_t Comm::next_send_ticket() const { return impl_->next_send_ticket; }

void Comm::wait_sends_where(const std::function<bool(int64_t ticket, int peer)>& chosen) {
  for (auto send = impl_->pending.begin(); send != impl_->pending.end();) {
    if (!chosen(send->first, send->second.peer)) {
      ++send;
      continue;
    }
    try {
      send->second.work->wait(impl_->timeout);
    } catch (const std::exception& error) {
      impl_->lost("send", send->second.peer, error);
    }
    send = impl_->pending.erase(send);
  }
}

void Comm::wait_sends_before(int64_t ticket) {
  wait_sends_where([ticket](int64_t t, int) { return t < ticket; });
}

void Comm::wait_sends_to(int peer, int64_t through) {
  wait_sends_where([peer, through](int64_t t, int p) { return p == peer && t <= through; });
}

at::Tensor Comm::recv(std::vector<int64_t> shape, at::ScalarType dtype, int peer, int tag) {
  return take_recv(post_recv(std::move(shape), dtype, peer, tag));
}

int Comm::post_recv(std::vector<int64_t> shape, at::ScalarType dtype, int peer, int tag) {
  // NCCL receives into device memory; Gloo into host memory, pinned when bound for a GPU.
  const auto host = torch::dtype(dtype).pinned_memory(impl_->staged());
  std::vector<at::Tensor> tensors{
      impl_->nccl() ? torch::empty(shape, torch::dtype(dtype).device(impl_->device.device))
                    : torch::empty(shape, host)};
  try {
    auto work = impl_->group->recv(tensors, peer, tag);
    impl_->posted[impl_->next_recv_handle] = {tensors[0], work, peer, {}};
  } catch (const std::exception& error) {
    impl_->lost("receive", peer, error);
  }
  return impl_->next_recv_handle++;
}

at::Tensor Comm::take_recv(int handle) {
  auto posted = impl_->posted.extract(handle);
  if (posted.empty()) throw std::logic_error("take_recv: no receive posted with this handle");
  try {
    posted.mapped().work->wait(impl_->timeout);
  } catch (const std::exception& error) {
    impl_->lost("receive", posted.mapped().peer, error);
  }
  return device::to_device(posted.mapped().tensor, impl_->device.device);
}

bool Comm::matches_by_tag() const { return !impl_->nccl(); }

void Comm::barrier() {
  try {
    impl_->group->barrier()->wait(impl_->timeout);
  } catch (const std::exception& error) {
    impl_->lost("barrier", -1, error);
  }
}

int Comm::join_group(const std::string& name, const std::vector<int>& ranks) {
  const auto me = std::find(ranks.begin(), ranks.end(), impl_->rank);
  if (me == ranks.end()) throw std::logic_error("join_group: rank is not a member of " + name);
  try {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("group-" + name, impl_->store);
    await_members(*prefixed, impl_->rank, int(ranks.size()), impl_->timeout, "group " + name);
    impl_->subgroups.push_back({name, impl_->make_group(prefixed, int(me - ranks.begin()),
                                                         int(ranks.size()))});
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& error) {
    impl_->lost(name + " group setup", -1, error);
  }
  return int(impl_->subgroups.size()) - 1;
}

double Comm::all_reduce_sum(double value, int group) {
  at::Tensor tensor = torch::full({1}, value, torch::kFloat64);
  all_reduce_sum(tensor, group);
  return tensor.item<double>();
}

void Comm::all_reduce_sum(at::Tensor& tensor, int group) {
  std::vector<at::Tensor> tensors{impl_->for_collective(tensor)};
  try {
    impl_->of(group).allreduce(tensors)->wait(impl_->timeout);
  } catch (const std::exception& error) {
    impl_->lost(impl_->label(group), -1, error);
  }
  if (!tensors[0].is_same(tensor)) tensor.copy_(tensors[0]);
}

int Comm::post_all_reduce_sum(at::Tensor& tensor, int group) {
  std::vector<at::Tensor> tensors{impl_->for_collective(tensor)};
  Impl::Posted posted{tensor, {}, group, tensors[0]};
  try {
    posted.work = impl_->of(group).allreduce(tensors);
  } catch (const std::exception& error) {
    impl_->lost(impl_->label(group), -1, error);
  }
  std::lock_guard<std::mutex> lock(impl_->reductions_mutex);
  const int handle = impl_->next_reduce_handle++;
  impl_->reductions[handle] = std::move(posted);
  return handle;
}

void Comm::wait_all_reduce(int handle) {
  Impl::Posted posted;
  {
    std::lock_guard<std::mutex> lock(impl_->reductions_mutex);
    auto node = impl_->reductions.extract(handle);
    if (node.empty()) throw std::logic_error("wait_all_reduce: no such handle");
    posted = std::move(node.mapped());
  }
  try {
    posted.work->wait(impl_->timeout);
  } catch (const std::exception& error) {
    impl_->lost(impl_->label(posted.peer), -1, error);
  }
  if (!posted.reduced.is_same(posted.tensor)) posted.tensor.copy_(posted.reduced);
}

void Comm::all_gather(const at::Tensor& part, std::vector<at::Tensor>& outputs, int group) {
  std::vector<at::Tensor> inputs{impl_->for_collective(part).contiguous()};
  std::vector<std::vector<at::Tensor>> gathered(1);
  for (const auto& output : outputs) gathered[0].push_back(impl_->for_collective(output));
  try {
    impl_->of(group).allgather(gathered, inputs)->wait(impl_->timeout);
  } catch (const std::exception& error) {
    impl_->lost(impl_->label(group) + " (all-gather)", -1, error);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!gathered[0][i].is_same(outputs[i])) outputs[i].copy_(gathered[0][i]);
  }
}

}  // namespace pipetrain::runtime
