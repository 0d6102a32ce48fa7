"""Loads a Hugging Face checkpoint (what `pipetrain export --format hf` writes) with transformers
and continues a prompt, to see the trained model in the tools it came from.

    .venv/bin/python3 scripts/hf_generate.py --model DIR --prompt TEXT [--tokenizer DIR] [--tokens 40]

The tokenizer is the model folder's own (an export carries over the tokenizer files of the
checkpoint its run started from) unless --tokenizer names another folder.

Greedy decoding (deterministic); prints the prompt and its continuation.
"""
import argparse

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the exported checkpoint folder")
    parser.add_argument("--tokenizer", help="the folder with the model's tokenizer (default: --model)")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--tokens", type=int, default=40)
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    prompt = tokenizer(args.prompt, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=args.tokens, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id or 0)
    print(tokenizer.decode(out[0], skip_special_tokens=True))


if __name__ == "__main__":
    main()
