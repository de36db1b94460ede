# Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
"""The float64 reference of stories260K over an FP8 (e4m3) KV cache, for Fp8KvCacheTest (its
output is the committed test resource stories260K_fp8_reference.json; rerun by hand).

    python stories260k_fp8_reference.py STORIES260K.bin GREEDY_REFERENCE.json OUT.json

STORIES260K.bin is the model zoo's llama2.c checkpoint, GREEDY_REFERENCE.json the greedy
reference of the paged tests (stories260K_greedy_reference.json). For every reference case the
prompt (one prefill step) and then each reference token but the last (one decode step each) are
fed (teacher forcing) through a float64 llama2.c forward written out below, twice: with the K/V
cache exact, and with every cached key and value rounded to e4m3 by torch's own float8_e4m3fn
cast at scale 1 (the cache's default), saturated at +-448 as the FP8 cache stores them; the
prompt's step attends its own keys and values unrounded (vLLM's prefix prefill, as the paged
decoders do), every decode step reads them back rounded. OUT.json holds, per case and
step, the first 16 logits of the FP8 forward and both forwards' argmax, and per case the largest
logit difference between the two: what the FP8 cache costs this model, independent of the
kernels under test. It also holds the greedy continuation of GREEDY tokens over the FP8
cache (free running) and its smallest top-1/top-2 logit margin, and for scale the largest logit
difference of a cache rounded to float16 instead.
"""

import json
import struct
import sys

import numpy as np
import torch

FIRST = 16
GREEDY = 24


def load(path):
    raw = open(path, "rb").read()
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    flat = np.frombuffer(raw[28:], dtype=np.float32).astype(np.float64)
    head = dim // heads
    at = [0]

    def take(*shape):
        n = int(np.prod(shape))
        a = flat[at[0] : at[0] + n].reshape(shape)
        at[0] += n
        return a

    m = {"dim": dim, "layers": layers, "heads": heads, "kv_heads": kv_heads, "head": head}
    m["emb"] = take(vocab, dim)
    m["rms_att"] = take(layers, dim)
    m["wq"] = take(layers, dim, dim)
    m["wk"] = take(layers, kv_heads * head, dim)
    m["wv"] = take(layers, kv_heads * head, dim)
    m["wo"] = take(layers, dim, dim)
    m["rms_ffn"] = take(layers, dim)
    m["w1"] = take(layers, hidden, dim)
    m["w2"] = take(layers, dim, hidden)
    m["w3"] = take(layers, hidden, dim)
    m["rms_final"] = take(dim)
    take(seq_len, head // 2)  # the checkpoint's RoPE tables; recomputed below
    take(seq_len, head // 2)
    m["wcls"] = m["emb"] if shared else take(vocab, dim)
    return m


def e4m3(x):
    """x rounded to the nearest e4m3fn value (ties to even), saturated at +-448."""
    t = torch.tensor(x, dtype=torch.float64).clamp(-448, 448)
    return t.to(torch.float8_e4m3fn).to(torch.float64).numpy()


def rmsnorm(x, g):
    return x / np.sqrt(np.mean(x * x) + 1e-5) * g


def rope(x, pos, head):
    # llama2.c's run.c: adjacent pairs, frequency by the position inside the head.
    x = x.copy()
    for i in range(0, x.shape[-1], 2):
        f = 1.0 / (10000.0 ** ((i % head) / head))
        c, s = np.cos(pos * f), np.sin(pos * f)
        a, b = x[i], x[i + 1]
        x[i], x[i + 1] = a * c - b * s, a * s + b * c
    return x


def float16(x):
    return x.astype(np.float16).astype(np.float64)


def forward(m, tokens, fp8, prompt_length, rounding=e4m3):
    """Logits after every position, the cache exact or rounded (to e4m3 by default). The first
    prompt_length tokens are one prefill step, the rest one decode step each, as the paged
    decoders run them; with a rounded cache (vLLM's semantics, decoder_layer's too) a prefill
    step of more than one token attends its own keys and values as computed and only what was
    cached before it rounded, and a decode step reads every key and value back rounded, its own
    included."""
    head, heads, kv_heads = m["head"], m["heads"], m["kv_heads"]
    keys = [[] for _ in range(m["layers"])]  # as the cache holds them
    values = [[] for _ in range(m["layers"])]
    exact_keys = [[] for _ in range(m["layers"])]  # as computed
    exact_values = [[] for _ in range(m["layers"])]
    out = []
    for pos, t in enumerate(tokens):
        own_rows = fp8 and pos < prompt_length and prompt_length > 1
        x = m["emb"][t].copy()
        for l in range(m["layers"]):
            h = rmsnorm(x, m["rms_att"][l])
            q = rope(m["wq"][l] @ h, pos, head)
            k = rope(m["wk"][l] @ h, pos, head)
            v = m["wv"][l] @ h
            keys[l].append(rounding(k) if fp8 else k)
            values[l].append(rounding(v) if fp8 else v)
            exact_keys[l].append(k)
            exact_values[l].append(v)
            read_k, read_v = (exact_keys[l], exact_values[l]) if own_rows else (keys[l], values[l])
            kk = np.array(read_k).reshape(-1, kv_heads, head)
            vv = np.array(read_v).reshape(-1, kv_heads, head)
            att = np.zeros(m["dim"])
            for hq in range(heads):
                g = hq // (heads // kv_heads)
                scores = kk[:, g] @ q[hq * head : (hq + 1) * head] / np.sqrt(head)
                p = np.exp(scores - scores.max())
                att[hq * head : (hq + 1) * head] = (p / p.sum()) @ vv[:, g]
            x = x + m["wo"][l] @ att
            h = rmsnorm(x, m["rms_ffn"][l])
            a = m["w1"][l] @ h
            x = x + m["w2"][l] @ (a / (1 + np.exp(-a)) * (m["w3"][l] @ h))
        out.append(m["wcls"] @ rmsnorm(x, m["rms_final"]))
    return np.array(out)


def main():
    m = load(sys.argv[1])
    cases = json.load(open(sys.argv[2]))
    out = []
    for c in cases:
        prompt, generated = c["prompt"], c["generated"]
        tokens = prompt + generated[:-1]
        p = len(prompt)
        exact = forward(m, tokens, False, p)[p - 1 :]
        fp8 = forward(m, tokens, True, p)[p - 1 :]
        fp16 = forward(m, tokens, True, p, float16)[p - 1 :]
        greedy = list(prompt)
        margin = float("inf")
        for _ in range(GREEDY):
            last = forward(m, greedy, True, p)[-1]
            top = np.sort(last)[-2:]
            margin = min(margin, float(top[1] - top[0]))
            greedy.append(int(last.argmax()))
        out.append(
            {
                "prompt": prompt,
                "fed": generated[:-1],
                "fp8_logits_first16": [[round(float(v), 6) for v in r[:FIRST]] for r in fp8],
                "fp8_argmax": [int(i) for i in fp8.argmax(axis=1)],
                "exact_argmax": [int(i) for i in exact.argmax(axis=1)],
                "max_abs_logit_diff_fp8_vs_exact": float(np.abs(fp8 - exact).max()),
                "max_abs_logit_diff_fp16_cache_vs_exact": float(np.abs(fp16 - exact).max()),
                "fp8_greedy": greedy[len(prompt) :],
                "fp8_greedy_min_margin": margin,
            }
        )
    with open(sys.argv[3], "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
