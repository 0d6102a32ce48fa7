"""Tokenizes a text file with a Hugging Face tokenizer into pipetrain's token files.

    .venv/bin/python3 scripts/hf_tokenize.py --tokenizer MODEL_DIR --text FILE --out DIR
                                             [--val-fraction 0.1]

Writes DIR/train.bin and DIR/val.bin in llm.c's format (docs/data.md: a 1024-byte header of
256 little-endian int32 [magic, version, token count, 0...], then the tokens as uint16 when the
vocabulary fits, else uint32), which `pipetrain train --data.format tokens --data.path DIR`
reads. The tokenizer is the model's own (tokenizer.json in MODEL_DIR, loaded with transformers'
AutoTokenizer): train with `--model.init_from MODEL_DIR` and the ids mean what the model learned.
The last --val-fraction of the tokens is the validation split.
"""
import argparse
import os
import struct
import sys

from transformers import AutoTokenizer


def write_tokens(path, tokens, vocabulary):
    wide = vocabulary > 65536
    header = [20240801 if wide else 20240520, 7 if wide else 1, len(tokens)] + [0] * 253
    temporary = f"{path}.tmp.{os.getpid()}"
    with open(temporary, "wb") as out:
        out.write(struct.pack("<256i", *header))
        out.write(struct.pack(f"<{len(tokens)}{'I' if wide else 'H'}", *tokens))
    os.replace(temporary, path)  # never a half-written token file under the final name


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", required=True, help="a folder with the model's tokenizer")
    parser.add_argument("--text", required=True, help="a UTF-8 text file")
    parser.add_argument("--out", required=True, help="the folder for train.bin and val.bin")
    parser.add_argument("--val-fraction", type=float, default=0.1)
    args = parser.parse_args()
    if not 0 < args.val_fraction < 1:
        sys.exit("hf_tokenize: --val-fraction must be between 0 and 1")
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    with open(args.text, encoding="utf-8") as text:
        tokens = tokenizer(text.read(), add_special_tokens=False)["input_ids"]
    split = int(len(tokens) * (1 - args.val_fraction))
    if split < 2 or len(tokens) - split < 2:
        sys.exit(f"hf_tokenize: {args.text} gives {len(tokens)} tokens, too few for two splits")
    os.makedirs(args.out, exist_ok=True)
    write_tokens(os.path.join(args.out, "train.bin"), tokens[:split], len(tokenizer))
    write_tokens(os.path.join(args.out, "val.bin"), tokens[split:], len(tokenizer))
    print(f"hf_tokenize: {len(tokens)} tokens ({split} train, {len(tokens) - split} validation), "
          f"vocabulary {len(tokenizer)}, into {args.out}")


if __name__ == "__main__":
    main()
