// Which workers of a pipeline sum a shared parameter's gradients (GPT: the tied embedding on
// the first stage and the head's copy on the last), for plain, looping and V placements.
#include <gtest/gtest.h>

#include "model/registry.h"
#include "runtime/shared_parameters.h"

namespace pipetrain::runtime {
namespace {

std::vector<std::vector<int>> holders(const std::vector<StageRange>& ranges, int workers,
                                      schedule::Placement placement = schedule::Placement::Looping) {
  Config c;
  c.model.layers = 4;  // 6 layers: embedding, 4 blocks, head
  return workers_holding_shared(*make_model(c), ranges, workers, placement);
}

TEST(SharedParameters, FirstAndLastWorkersHoldTheTiedWeight) {
  using Holders = std::vector<std::vector<int>>;
  EXPECT_EQ(holders({{0, 6}}, 1), (Holders{{0}}));                        // one stage: one tensor
  EXPECT_EQ(holders({{0, 3}, {3, 6}}, 2), (Holders{{0, 1}}));
  EXPECT_EQ(holders({{0, 2}, {2, 4}, {4, 6}}, 3), (Holders{{0, 2}}));     // not the middle
  // Looping placement, 4 stages on 2 workers: stage 3 (the head) sits on worker 1.
  EXPECT_EQ(holders({{0, 2}, {2, 3}, {3, 4}, {4, 6}}, 2), (Holders{{0, 1}}));
  // V placement (ZB-V, DualPipeV): stages 0 and 3 both sit on worker 0, which sums them alone.
  EXPECT_EQ(holders({{0, 2}, {2, 3}, {3, 4}, {4, 6}}, 2, schedule::Placement::V), (Holders{{0}}));
  EXPECT_EQ(holders({{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}}, 3, schedule::Placement::V),
            (Holders{{0}}));
}

}  // namespace
}  // namespace pipetrain::runtime
