"""Creates a tiny random Hugging Face model with its own tokenizer, locally (nothing is
downloaded): the starting point of the fine-tuning recipe in docs/models.md and its test.

    .venv/bin/python3 scripts/make_tiny_hf_model.py --out DIR --text FILE [--kind llama|gpt2]
                                                    [--vocab 512] [--seed 0]

The tokenizer is a byte-level BPE trained on FILE with the `tokenizers` library (vocabulary
--vocab); the model a LlamaForCausalLM (grouped-query attention, untied head) or
GPT2LMHeadModel of width 64 and 2 blocks with transformers' own initialisation. Both are
saved into DIR with save_pretrained (config.json, model.safetensors, tokenizer.json).
"""
import argparse

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast)


def byte_level_bpe(text, vocabulary):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocabulary, special_tokens=["<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([text], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--text", required=True, help="text the tokenizer is trained on")
    parser.add_argument("--kind", choices=["llama", "gpt2"], default="llama")
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    with open(args.text, encoding="utf-8") as text:
        tokenizer = byte_level_bpe(text.read(), args.vocab)
    eos = tokenizer.eos_token_id
    if args.kind == "llama":
        config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=192,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=256, tie_word_embeddings=False,
                             bos_token_id=eos, eos_token_id=eos)
        model = LlamaForCausalLM(config)
    else:
        config = GPT2Config(vocab_size=len(tokenizer), n_embd=64, n_head=4, n_layer=2, n_positions=256,
                            bos_token_id=eos, eos_token_id=eos)
        model = GPT2LMHeadModel(config)
    model.save_pretrained(args.out, safe_serialization=True)
    tokenizer.save_pretrained(args.out)
    print(f"make_tiny_hf_model: a {args.kind} model of {sum(p.numel() for p in model.parameters())} "
          f"parameters and a tokenizer of {len(tokenizer)} ids in {args.out}")


if __name__ == "__main__":
    main()
