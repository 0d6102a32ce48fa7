#pragma once
// Facts about the running process that affect speed, reported at start-up.
#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain {

// The cores this process may run on (its CPU affinity: taskset, a container's cpuset), at
// least 1; the machine's count where the affinity cannot be read.
int cpu_cores();
std::vector<int> allowed_cores();  // their indices, ascending

// The compute threads of one of `workers` worker processes on this machine: train.threads
// (`configured`) when set; else all of its cores when it is bound to a block of them (it runs
// alone there; cpu_cores() is then its block), else an equal share of the cores (workers usually
// outnumber cores: one thread each). The launcher's measured partition asks it too (unbound: a
// block is that share, give or take a core).
int64_t worker_compute_threads(int64_t configured, bool bound, int64_t workers);

// `workers` contiguous blocks of `cores` (in order), as equal as can be (the first
// cores.size() % workers blocks one core larger), together every core: one per worker process.
// Empty when there are fewer cores than workers (some would have to share one).
std::vector<std::vector<int>> core_blocks(const std::vector<int>& cores, int workers);
// "0-3,6": runs of consecutive indices.
std::string describe_cores(const std::vector<int>& cores);
// Restricts this process (and the threads it starts later) to `cores`; false on failure.
// Only a system call: safe between fork and exec.
bool bind_to_cores(const std::vector<int>& cores);

// The memory this process may use: the machine's physical memory, or a smaller cgroup limit
// (a container's memory.max).
double machine_memory_bytes();

// Keeps freed memory inside the process (glibc malloc: no mmap for large blocks, no trimming).
// Training allocates and frees the same large activation buffers every step; by default glibc
// maps each block over 32 MB afresh and returns it, and the page faults cost 1.4-4x in
// throughput here (bench/train_throughput). Call once at start-up.
void keep_freed_memory_in_process();
// The opposite, for a run under a memory budget: blocks of 256 KiB or more are mapped and
// unmapped when freed, the heap's free top over 16 MiB is returned. A kept heap grew a
// GPT-2-small worker's resident memory 1.3-2 GiB past its tensors; with 1 MiB, bfloat16's
// half-size activations (GPT-2 medium: 512 KiB a sequence) fragmented the heap, 170 MiB more
// resident, over the budget (docs/benchmarks.md). Call once the config is read.
void return_freed_memory_to_system();

}  // namespace pipetrain
