#pragma once
// What waits for a GPU, and what a CUDA graph cannot capture, is a value read on the host:
// item() (aten::_local_scalar_dense) or a shape that depends on values (aten::nonzero). These
// tests count the reads on a CPU, where the same code runs, so a read added to a hot path fails
// CI without a GPU.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <ATen/record_function.h>

namespace pipetrain::testing {

// The operators this thread dispatches while a HostReads lives, and for each value read the
// operator it was read inside ("" when the host's own code called item()). A thread-local
// RecordFunction callback: the CPU's autograd runs a backward on the calling thread.
class HostReads {
 public:
  HostReads() {
    state() = {};
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&HostReads::on_start, &HostReads::on_end)
            .scopes({at::RecordScope::FUNCTION}));
  }
  ~HostReads() { at::removeCallback(handle_); }
  HostReads(const HostReads&) = delete;
  HostReads& operator=(const HostReads&) = delete;

  int64_t values() const { return int64_t(state().reads.size()); }
  // Values the host's own code read after the last dispatch of `op` ("" : all of them).
  int64_t values_read_by_host_code(const std::string& after_op = "") const {
    const auto& s = state();
    int64_t from = 0;
    for (int64_t i = 0; i < int64_t(s.dispatched.size()); ++i) {
      if (s.dispatched[size_t(i)] == after_op) from = i;
    }
    return std::count_if(s.reads.begin(), s.reads.end(),
                         [&](const Read& r) { return r.caller.empty() && r.at >= from; });
  }
  int64_t values_read_inside(const std::string& op) const {
    return std::count_if(state().reads.begin(), state().reads.end(),
                         [&](const Read& r) { return r.caller == op; });
  }
  int64_t value_dependent_shapes() const { return count("aten::nonzero"); }
  // How many times `op` ("aten::mm") was dispatched: that the callback sees the code at all.
  int64_t count(const std::string& op) const {
    return std::count(state().dispatched.begin(), state().dispatched.end(), op);
  }
  // For a failure message: each read and where (the operator it was inside, or the host's code
  // after which operator).
  std::string describe() const {
    std::string text;
    for (const auto& r : state().reads) {
      text += r.caller.empty() ? "host after " + state().dispatched[size_t(r.at)] : r.caller;
      text += "; ";
    }
    return text;
  }

 private:
  struct Read {
    std::string caller;  // the innermost operator it happened in, "" = the host's code
    int64_t at = 0;      // index into dispatched of the operator just before it
  };
  struct State {
    std::vector<std::string> dispatched, open;
    std::vector<Read> reads;
  };
  static State& state() {
    thread_local State s;
    return s;
  }
  static bool is_item(const std::string& name) {
    return name == "aten::item" || name == "aten::_local_scalar_dense";
  }
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    State& s = state();
    const std::string name = fn.name();
    if (name == "aten::_local_scalar_dense") {
      const auto caller = std::find_if(s.open.rbegin(), s.open.rend(),
                                       [](const std::string& n) { return !is_item(n); });
      s.reads.push_back({caller == s.open.rend() ? "" : *caller,
                         std::max<int64_t>(0, int64_t(s.dispatched.size()) - 1)});
    }
    s.open.push_back(name);
    s.dispatched.push_back(name);
    return nullptr;
  }
  static void on_end(const at::RecordFunction&, at::ObserverContext*) {
    if (!state().open.empty()) state().open.pop_back();
  }
  at::CallbackHandle handle_;
};

}  // namespace pipetrain::testing
