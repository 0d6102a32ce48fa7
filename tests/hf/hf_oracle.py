"""transformers as the oracle of pipetrain's Hugging Face import and export (tests/hf).

  hf_oracle.py make OUT             tiny random models (GPT-2; Llama with grouped-query
                                    attention, an untied head, rope theta 50000; Llama tied with
                                    llama3 rotary scaling), saved with save_pretrained in float64,
                                    a token file (data.format "safetensors") and each model's
                                    logits of its training rows
  hf_oracle.py step OUT NAME EXPORTED
                                    one AdamW step of OUT/NAME on the training rows (the step
                                    pipetrain's test takes on 2 stages), then from_pretrained of
                                    EXPORTED (pipetrain's export): prints JSON with the largest
                                    relative difference of any weight and of the logits, the
                                    loss before the step and after it (next_loss)

Float64 throughout. transformers computes RMSNorm and the rotary tables in float32 even in a
float64 model; for a float64 comparison those two are patched to compute in the model's dtype
(the same formulas; the rotary frequencies of the llama3 scaling recomputed in float64 by
_llama3_frequencies, and checked against transformers' own float32 ones to 1e-6 by `make`).
"""
import json
import math
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
from transformers.models.llama import modeling_llama

VOCAB, SEQ, ROWS = 40, 16, 4
LR, BETAS, EPS, WEIGHT_DECAY = 1e-2, (0.9, 0.99), 1e-8, 0.01


def rms_norm_in_input_dtype(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def rotary_in_float64(self, x, position_ids):
    freqs = position_ids[..., None].to(torch.float64) * self.inv_freq.to(torch.float64)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


modeling_llama.LlamaRMSNorm.forward = rms_norm_in_input_dtype
modeling_llama.LlamaRotaryEmbedding.forward = rotary_in_float64


def _llama3_frequencies(config):
    rope = config.rope_parameters
    dim = config.hidden_size // config.num_attention_heads
    inv = 1.0 / (rope["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if rope["rope_type"] == "default":
        return inv
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    original = rope["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > original / low, inv / factor, inv)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < original / high) & ~(wavelen > original / low)
    return torch.where(medium, smoothed, scaled)


def in_float64(model):
    model = model.to(torch.float64)
    if isinstance(model, LlamaForCausalLM):
        rotary = model.model.rotary_emb
        float32_frequencies = rotary.inv_freq.clone()
        rotary.inv_freq = _llama3_frequencies(model.config)
        error = ((rotary.inv_freq - float32_frequencies).abs() / rotary.inv_freq).max().item()
        assert error < 1e-6, f"llama3 frequencies differ from transformers' by {error}"
    return model


def configs():
    return {
        "gpt2": GPT2Config(vocab_size=VOCAB, bos_token_id=0, eos_token_id=0, n_embd=32, n_head=4, n_layer=2, n_positions=24,
                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
        "llama": LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                             rope_theta=50000.0, rms_norm_eps=1e-6, tie_word_embeddings=False),
        "llama_tied_scaled": LlamaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=True,
            rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 16}),
    }


def load(path):
    model = (GPT2LMHeadModel if "gpt2" in path.split("/")[-1] else LlamaForCausalLM).from_pretrained(
        path, dtype=torch.float64)
    return in_float64(model)


def make(out):
    torch.manual_seed(7)
    tokens = {name: torch.randint(0, VOCAB, (ROWS, SEQ)) for name in
              ("train_inputs", "train_labels", "val_inputs", "val_labels")}
    save_file(tokens, f"{out}/data.safetensors")
    for name, config in configs().items():
        model = (GPT2LMHeadModel if name == "gpt2" else LlamaForCausalLM)(config).to(torch.float64)
        with torch.no_grad():  # every weight away from its initial value, norms included
            for parameter in model.parameters():
                parameter.add_(0.05 * torch.randn_like(parameter))
        model.save_pretrained(f"{out}/{name}", safe_serialization=True)
        model = in_float64(model).eval()
        with torch.no_grad():
            logits = model(tokens["train_inputs"]).logits
        save_file({"logits": logits.contiguous()}, f"{out}/{name}.logits.safetensors")


def relative(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()


def step(out, name, exported):
    data = load_file(f"{out}/data.safetensors")
    model = load(f"{out}/{name}").train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    logits = model(data["train_inputs"]).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), data["train_labels"].reshape(-1))
    loss.backward()
    optimizer.step()
    theirs = load(exported).eval()
    ours_state, their_state = model.state_dict(), theirs.state_dict()
    weight_errors = {key: relative(their_state[key], value) for key, value in ours_state.items()
                     if value.is_floating_point() and key in their_state}
    missing = [key for key in ours_state if key not in their_state]
    model.eval()
    with torch.no_grad():
        logit_error = relative(theirs(data["val_inputs"]).logits, model(data["val_inputs"]).logits)
        logits = model(data["train_inputs"]).logits
        next_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), data["train_labels"].reshape(-1))
    print(json.dumps({"loss": loss.item(), "next_loss": next_loss.item(), "weights": len(weight_errors), "missing": missing,
                      "max_weight_error": max(weight_errors.values()), "logit_error": logit_error}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "step":
        step(*sys.argv[2:5])
    else:
        sys.exit(f"unknown command {sys.argv[1]}")
