#pragma once
// Point-to-point and collective communication between pipeline workers: c10d TCPStore for the
// rendezvous and ProcessGroupGloo over TCP. Every failure (dead peer, timeout) becomes a
// UserError naming the rank, never an abort. c10d headers stay in comm.cpp.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "device/execution.h"

namespace pipetrain::runtime {

// Every message of a collective or send/recv that failed because a peer went away contains
// this: the launcher recognises such follow-on errors by it and reports the root cause instead.
constexpr const char* kLostPeerMessage = "failed (a worker died or the";

// A rendezvous address on this machine's loopback ("127.0.0.1", "localhost"): Gloo binds it, and
// a one-machine run's rendezvous goes through a file.
inline bool is_loopback_address(const std::string& address) {
  return address == "127.0.0.1" || address == "localhost";
}

// The torchrun contract: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK.
struct WorkerEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  bool store_hosted_elsewhere = false;  // pipetrain's launcher hosts the store (no port race)
  // One machine, loopback, no fixed port: rendezvous through this file (c10d FileStore) so no
  // process listens on a TCP port; c10d's TCPStore server binds every interface.
  std::string store_file;
};

// Hosts the rendezvous store (the launcher keeps it alive); port 0: an OS-chosen free port.
class StoreHost {
 public:
  StoreHost(const std::string& addr, int port, std::chrono::milliseconds timeout);
  ~StoreHost();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// How this worker's tensors travel (device/execution.h decides): on `device` they are computed;
// received tensors land there, whatever the transport carries them in.
struct CommDevice {
  device::Transport transport = device::Transport::Gloo;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
};

class Comm {
 public:
  Comm(const WorkerEnvironment& env, std::chrono::milliseconds timeout, CommDevice device = {});
  ~Comm();
  int rank() const;
  int world_size() const;

  // Asynchronous send: the tensor is kept alive until the send is waited for, so compute
  // overlaps the transfer. Shapes on both sides come from the config, so Gloo never sees a size
  // mismatch. Returns the send's ticket: tickets grow in the order sends are posted.
  int64_t send(const at::Tensor& tensor, int peer, int tag);
  void wait_sends();
  // The sends posted before `ticket` only: a no-flush step waits for the previous step's sends,
  // whose receivers are never behind this worker (they would be for this step's).
  void wait_sends_before(int64_t ticket);
  // The sends to `peer` up to ticket `through`: those the peer is known to have received
  // (schedule/send_release.h), so the wait returns at once and their tensors are freed.
  void wait_sends_to(int peer, int64_t through);
  int64_t next_send_ticket() const;
  // Blocking receive into a fresh tensor of the given shape and dtype, on this worker's device.
  at::Tensor recv(std::vector<int64_t> shape, at::ScalarType dtype, int peer, int tag);
  // The same in two halves: post now (returns a handle), wait for the data later.
  int post_recv(std::vector<int64_t> shape, at::ScalarType dtype, int peer, int tag);
  at::Tensor take_recv(int handle);

  void barrier();  // all ranks
  // Whether a receive may be posted before sends that precede it in the action list. Gloo
  // matches each receive to its send by tag; NCCL matches a pair's operations in the order
  // they are issued and runs them in that order on one stream, so a receive posted ahead of a
  // send to the same peer could wait for a send queued behind that send on the other side
  // (docs/architecture.md, "NCCL's ordering").
  bool matches_by_tag() const;

  // A sub-group of `ranks` (a replica group, one replica's pipeline, a shared parameter's holders):
  // every member calls this with the same name and list, in the same order relative to its
  // other joins; non-members never do. Returns the handle for the reductions below.
  static constexpr int kWorld = -1;  // the handle of the group of all ranks
  int join_group(const std::string& name, const std::vector<int>& ranks);
  double all_reduce_sum(double value, int group = kWorld);
  void all_reduce_sum(at::Tensor& tensor, int group);  // in place
  // The same in two halves: post now (returns a handle), wait later; the caller leaves `tensor`
  // alone in between. Every member posts the group's reductions in the same order. These two may
  // be called from two threads at once, on different groups (an update's helper thread).
  int post_all_reduce_sum(at::Tensor& tensor, int group);
  void wait_all_reduce(int handle);
  // Every member's `part` (same shape everywhere) into outputs[i] = member i's part; outputs
  // are preallocated, e.g. equal slices of one flat buffer. `part` may alias its own output.
  void all_gather(const at::Tensor& part, std::vector<at::Tensor>& outputs, int group);

 private:
  void wait_sends_where(const std::function<bool(int64_t ticket, int peer)>& chosen);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipetrain::runtime
