// HostReads counts the values read on the host and says where: in the host's own code, inside
// an operator, or inside a CpuOnlyRead (left out).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "device/host_reads.h"

namespace pipetrain::device {
namespace {

TEST(HostReads, CountsEachItemAndWhereItHappened) {
  const torch::Tensor x = torch::arange(6, torch::kDouble);
  HostReads reads;
  const double first = x.sum().item<double>();  // host code, after aten::sum
  const double second = x.max().item<double>();
  {
    const CpuOnlyRead cpu_only;  // left out
    EXPECT_FALSE((x < 0).any().item<bool>());
  }
  // repeat_interleave's CPU kernel reads its output length from the repeats (inside the op).
  const torch::Tensor repeated = torch::repeat_interleave(torch::tensor({1, 2}, torch::kLong));
  EXPECT_EQ(first + second, 20.0);
  EXPECT_EQ(repeated.numel(), 3);
  EXPECT_EQ(reads.values_read_by_host_code(), 2) << reads.describe();
  EXPECT_EQ(reads.values_read_by_host_code("aten::max"), 1);
  const int64_t inside_op = reads.values_read_inside("aten::repeat_interleave");
  EXPECT_GT(inside_op, 0) << reads.describe();
  EXPECT_EQ(reads.values(), 2 + inside_op) << reads.describe();
  EXPECT_EQ(reads.count("aten::max"), 1);
  EXPECT_EQ(reads.describe().substr(0, 20), "host after aten::sum");
  EXPECT_EQ(reads.describe_grouped(), std::to_string(inside_op) +
                                          " x inside aten::repeat_interleave, 1 x host after "
                                          "aten::max, 1 x host after aten::sum");
  EXPECT_THROW(reads.values_read_by_host_code("aten::never_called"), std::invalid_argument);
}

TEST(HostReads, CountsOnlyWhileItLivesAndStartsAfresh) {
  const torch::Tensor x = torch::ones({3});
  { HostReads before; (void)x.sum().item<float>(); }
  (void)x.sum().item<float>();  // no counter alive
  HostReads reads;
  EXPECT_EQ(reads.values(), 0);
  EXPECT_EQ(reads.describe_grouped(), "none");
  EXPECT_THROW(HostReads second, std::logic_error);  // they would count each read twice
  EXPECT_EQ(reads.count("aten::sum"), 0);
  EXPECT_EQ(x.nonzero().size(0), 3);
  EXPECT_EQ(reads.value_dependent_shapes(), 1);
}

}  // namespace
}  // namespace pipetrain::device
