#include "device/host_reads.h"

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>

namespace pipetrain::device {
namespace {

constexpr const char* kCpuOnlyRead = "pipetrain::cpu_only_read";
constexpr const char* kRead = "aten::_local_scalar_dense";

struct State {
  bool counting = false;  // a HostReads lives on this thread (one at a time: they share this)
  std::vector<std::string> dispatched, open;  // open: the operators and scopes now running
  std::vector<bool> top_level;                // of each dispatched: called by no other operator
  std::vector<HostReads::Read> reads;
};

State& state() {
  thread_local State s;
  return s;
}

bool is_item(const std::string& name) { return name == "aten::item" || name == kRead; }

void record_read(State& s) {
  if (std::find(s.open.begin(), s.open.end(), kCpuOnlyRead) != s.open.end()) return;
  const auto inside = std::find_if(s.open.rbegin(), s.open.rend(),
                                   [](const std::string& name) { return !is_item(name); });
  int64_t after = int64_t(s.dispatched.size()) - 1;
  while (after >= 0 && (!s.top_level[size_t(after)] || is_item(s.dispatched[size_t(after)]))) --after;
  s.reads.push_back({inside == s.open.rend() ? "" : *inside, after});
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  State& s = state();
  const std::string name = fn.name();
  if (name == kRead) record_read(s);
  if (fn.scope() == at::RecordScope::FUNCTION) {
    const bool nested = std::any_of(s.open.begin(), s.open.end(),
                                    [](const std::string& open) { return open.rfind("aten::", 0) == 0; });
    s.dispatched.push_back(name);
    s.top_level.push_back(!nested);
  }
  s.open.push_back(name);
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {
  if (!state().open.empty()) state().open.pop_back();
}

// "host after aten::sum" (our code read it, after that operator) or "inside aten::mm".
std::string place_of(const HostReads::Read& r, const std::vector<std::string>& dispatched) {
  if (!r.inside.empty()) return "inside " + r.inside;
  return "host after " + (r.after >= 0 ? dispatched[size_t(r.after)] : std::string("the start"));
}

}  // namespace

CpuOnlyRead::CpuOnlyRead() : scope_(at::RecordScope::USER_SCOPE) {
  if (scope_.isActive()) scope_.before(kCpuOnlyRead);
}

HostReads::HostReads() {
  if (state().counting) throw std::logic_error("HostReads: one at a time on a thread");
  state() = {};
  state().counting = true;
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                           .scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
}

HostReads::~HostReads() {
  at::removeCallback(handle_);
  state().counting = false;
}

const std::vector<HostReads::Read>& HostReads::reads() const { return state().reads; }
const std::vector<std::string>& HostReads::dispatched() const { return state().dispatched; }

int64_t HostReads::values_read_by_host_code(const std::string& after_op) const {
  int64_t from = -1;
  for (int64_t i = 0; i < int64_t(dispatched().size()); ++i) {
    if (dispatched()[size_t(i)] == after_op) from = i;
  }
  if (!after_op.empty() && from < 0) throw std::invalid_argument(after_op + " was not dispatched");
  return std::count_if(reads().begin(), reads().end(),
                       [&](const Read& r) { return r.inside.empty() && r.after >= from; });
}

int64_t HostReads::values_read_inside(const std::string& op) const {
  return std::count_if(reads().begin(), reads().end(), [&](const Read& r) { return r.inside == op; });
}

int64_t HostReads::count(const std::string& op) const {
  return std::count(dispatched().begin(), dispatched().end(), op);
}

std::string HostReads::describe() const {
  std::string text;
  for (const auto& r : reads()) text += place_of(r, dispatched()) + "; ";
  return text;
}

std::string HostReads::describe_grouped() const {
  std::map<std::string, int64_t> by_place;
  for (const auto& r : reads()) ++by_place[place_of(r, dispatched())];
  std::vector<std::pair<int64_t, std::string>> places;
  for (const auto& [place, count] : by_place) places.emplace_back(-count, place);
  std::sort(places.begin(), places.end());
  std::string text;
  for (const auto& [count, place] : places) {
    text += (text.empty() ? "" : ", ") + std::to_string(-count) + " x " + place;
  }
  return text.empty() ? "none" : text;
}

}  // namespace pipetrain::device
