#!/usr/bin/env python3
"""Writes an llm.c token file as karpathy/llm.c dev/data/data_common.py's write_datafile does,
with the standard library only (struct, array): a header of 256 little-endian int32 values
(magic, version, token count, zeros), then the tokens, little-endian uint16 ("gpt-2") or
uint32 ("llama-3").

Usage: write_llmc_tokens.py OUT.bin gpt-2|llama-3 ID [ID ...]
"""
import array
import struct
import sys

HEADERS_INFO = {
    "gpt-2": {"magic": 20240520, "version": 1, "typecode": "H"},
    "llama-3": {"magic": 20240801, "version": 7, "typecode": "I"},
}


def write_datafile(filename, toks, model_desc):
    assert len(toks) < 2**31, "token count too large"
    info = HEADERS_INFO[model_desc]
    header = [0] * 256
    header[0] = info["magic"]
    header[1] = info["version"]
    header[2] = len(toks)
    tokens = array.array(info["typecode"], toks)
    assert tokens.itemsize == (2 if info["typecode"] == "H" else 4)
    if sys.byteorder == "big":
        tokens.byteswap()
    with open(filename, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(tokens.tobytes())


if __name__ == "__main__":
    write_datafile(sys.argv[1], [int(t) for t in sys.argv[3:]], sys.argv[2])
