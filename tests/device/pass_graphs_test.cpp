// What a worker's captured graphs hold out of the allocator's count: the unallocated bytes of
// their own pools' segments, from an allocator snapshot (here a made-up one: no GPU needed).
#include <gtest/gtest.h>

#include "device/pass_graphs.h"

namespace pipetrain::device {
namespace {

c10::CachingDeviceAllocator::SegmentInfo segment(c10::MempoolId_t pool, size_t total,
                                                 size_t allocated) {
  c10::CachingDeviceAllocator::SegmentInfo info;
  info.owner_private_pool_id = pool;
  info.total_size = total;
  info.allocated_size = allocated;
  return info;
}

TEST(PassGraphPools, UnallocatedBytesOfTheWorkersPoolsOnly) {
  constexpr size_t kMiB = 1 << 20;
  const std::vector<c10::CachingDeviceAllocator::SegmentInfo> segments = {
      segment({0, 0}, 20 * kMiB, 4 * kMiB),  // the default pool: eager tensors and the cache
      segment({0, 1}, 2 * kMiB, 512),        // slot 1's small blocks: an output left in it
      segment({0, 1}, 40 * kMiB, 0),         // slot 1's activations and temporaries
      segment({0, 2}, 20 * kMiB, kMiB),      // slot 2
      segment({0, 3}, 8 * kMiB, 0)};         // a pool of something else
  EXPECT_EQ(unallocated_pool_bytes(segments, {{0, 1}, {0, 2}}),
            int64_t(2 * kMiB - 512 + 40 * kMiB + 19 * kMiB));
  EXPECT_EQ(unallocated_pool_bytes(segments, {{0, 3}}), int64_t(8 * kMiB));
  EXPECT_EQ(unallocated_pool_bytes(segments, {}), 0);
}

}  // namespace
}  // namespace pipetrain::device
