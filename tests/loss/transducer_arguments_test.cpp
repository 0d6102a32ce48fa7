// The transducer API's argument checks: every entry point refuses the same bad input with the
// same clear UserError (no NaN, no raw c10 message), before any work.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

#include "core/error.h"
#include "loss/joint_network.h"

namespace pipetrain::loss {
namespace {

// The message of the UserError `call` throws ("" and a test failure if it throws none or
// another type).
std::string user_error(const std::function<void()>& call) {
  try {
    call();
  } catch (const UserError& error) {
    return error.what();
  } catch (const std::exception& error) {
    ADD_FAILURE() << "not a UserError: " << error.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

struct Batch {
  at::Tensor enc, pred, targets, t_len, u_len;
};

// B samples of T = 3 frames and U = 2 labels, joint dimension J.
Batch make_batch(int64_t B, int64_t J, at::ScalarType dtype = at::kDouble) {
  torch::manual_seed(3);
  return {torch::randn({B, 3, J}, dtype), torch::randn({B, 3, J}, dtype),
          torch::ones({B, 2}, torch::kLong), torch::full({B}, 3, torch::kLong),
          torch::full({B}, 2, torch::kLong)};
}

JointNetwork double_joint(int64_t J, int64_t V) {
  JointNetwork joint(J, V);
  joint->to(torch::kDouble);
  return joint;
}

TEST(TransducerArguments, EmptyBatchIsTheSameErrorInEveryEntryPoint) {
  const Batch b = make_batch(0, 4);
  JointNetwork joint = double_joint(4, 5);
  const std::string batched = user_error([&] {
    transducer_loss_batched(joint(b.enc, b.pred), b.targets, b.t_len, b.u_len);
  });
  const std::string sample_wise = user_error([&] {
    sample_wise_transducer_loss(joint, b.enc, b.pred, b.targets, b.t_len, b.u_len);
  });
  EXPECT_EQ(batched, "transducer loss: empty batch (B = 0): no sample to take the loss of");
  EXPECT_EQ(sample_wise, batched);
  // Sum over no sample is refused too: one rule, whatever the reduction.
  EXPECT_EQ(user_error([&] {
              transducer_loss_batched(joint(b.enc, b.pred), b.targets, b.t_len, b.u_len,
                                      {0, Reduction::Sum});
            }),
            batched);
}

TEST(TransducerArguments, MismatchedJointInputsAreNamedBeforeAnyWork) {
  const Batch b = make_batch(2, 4);
  JointNetwork joint = double_joint(4, 5);
  EXPECT_EQ(user_error([&] {
              sample_wise_transducer_loss(joint, b.enc, torch::randn({2, 3, 6}, torch::kDouble),
                                          b.targets, b.t_len, b.u_len);
            }),
            "sample-wise transducer loss: enc has joint dimension 4 but pred has 6");
  JointNetwork wider = double_joint(8, 5);
  EXPECT_EQ(user_error([&] {
              sample_wise_transducer_loss(wider, b.enc, b.pred, b.targets, b.t_len, b.u_len);
            }),
            "sample-wise transducer loss: the joint network takes joint dimension 8, enc and "
            "pred have 4");
  JointNetwork float_joint(4, 5);
  EXPECT_EQ(user_error([&] {
              sample_wise_transducer_loss(float_joint, b.enc, b.pred, b.targets, b.t_len,
                                          b.u_len);
            }),
            "sample-wise transducer loss: enc and pred are Double but the joint network's "
            "parameters are Float");
  EXPECT_EQ(user_error([&] {
              sample_wise_transducer_loss(joint, b.enc, b.pred.to(torch::kFloat), b.targets,
                                          b.t_len, b.u_len);
            }),
            "sample-wise transducer loss: enc is Double but pred is Float");
}

TEST(TransducerArguments, InPlaceKernelRefusesLogitsThatRequireGrad) {
  const at::Tensor logits = torch::randn({3, 3, 5}, torch::kDouble).requires_grad_();
  EXPECT_EQ(user_error([&] { transducer_loss_and_grad_(logits, torch::tensor({1, 2}), 0); }),
            "transducer loss: logits require grad, but the kernel overwrites them with their "
            "gradient in place; pass logits.detach() (or want_grad = false)");
  // Reading them only is fine: the loss of a detached copy, the logits untouched.
  const at::Tensor before = logits.detach().clone();
  const double loss = transducer_loss_and_grad_(logits, torch::tensor({1, 2}), 0, false);
  EXPECT_EQ(loss, transducer_loss_and_grad_(logits.detach().clone(), torch::tensor({1, 2}), 0));
  EXPECT_TRUE(torch::equal(logits.detach(), before));
}

TEST(TransducerArguments, BlankOutsideVocabularyIsOneMessageEverywhere) {
  const Batch b = make_batch(2, 4);
  JointNetwork joint = double_joint(4, 5);
  const std::string expected = "transducer loss: blank -1 outside the vocabulary [0, 5)";
  const at::Tensor logits = joint(b.enc, b.pred).detach();
  EXPECT_EQ(user_error([&] {
              transducer_loss_and_grad_(logits[0].clone(), torch::tensor({1, 2}), -1);
            }),
            expected);
  EXPECT_EQ(user_error([&] {
              transducer_loss_batched(logits, b.targets, b.t_len, b.u_len, {-1, Reduction::Mean});
            }),
            expected);
  EXPECT_EQ(user_error([&] {
              sample_wise_transducer_loss(joint, b.enc, b.pred, b.targets, b.t_len, b.u_len,
                                          {-1, Reduction::Mean, 0, nullptr});
            }),
            expected);
}

TEST(TransducerArguments, LabelOutsideVocabularyNamesTheVocabulary) {
  const Batch b = make_batch(2, 4);
  JointNetwork joint = double_joint(4, 5);
  const at::Tensor targets = torch::tensor({{1, 7}, {1, 2}});
  const std::string expected =
      "transducer loss: label 7 of sample 0 outside the vocabulary [0, 5)";
  EXPECT_EQ(user_error([&] {
              transducer_loss_batched(joint(b.enc, b.pred), targets, b.t_len, b.u_len);
            }),
            expected);
  EXPECT_EQ(user_error([&] {
              sample_wise_transducer_loss(joint, b.enc, b.pred, targets, b.t_len, b.u_len);
            }),
            expected);
}

TEST(TransducerArguments, LengthsAndTargetsMustBeIntegerTensors) {
  const Batch b = make_batch(2, 4);
  JointNetwork joint = double_joint(4, 5);
  const at::Tensor logits = joint(b.enc, b.pred);
  const at::Tensor bool_lengths = torch::ones({2}, torch::kBool);
  EXPECT_EQ(user_error([&] {
              transducer_loss_batched(logits, b.targets, b.t_len, bool_lengths);
            }),
            "transducer loss: lengths must be an integer tensor, got Bool");
  EXPECT_EQ(user_error([&] {
              sample_wise_transducer_loss(joint, b.enc, b.pred, b.targets, bool_lengths, b.u_len);
            }),
            "transducer loss: lengths must be an integer tensor, got Bool");
  EXPECT_EQ(user_error([&] {
              transducer_loss_batched(logits, b.targets.to(torch::kBool), b.t_len, b.u_len);
            }),
            "transducer loss: targets must be an integer tensor, got Bool");
}

}  // namespace
}  // namespace pipetrain::loss
