"""Hugging Face transformers' generate (eager, greedy) decode speed for the Java decoder benchmark's
model: GPT-2 architecture, 4 layers, hidden 512, 8 heads, intermediate 2048, vocab 8192, random
weights, float32, prompt 512 random tokens, batch 1, 16, 64, on CUDA.

Per decode step = (time of generate with 1 + N new tokens - time with 1 new token) / N, so the
prefill and the first token are left out, as in PagedDecodeBenchmark. Median of 5 after a warm-up.
Prints a Markdown table. Run by gpu-java-suite.sh; standalone: python3 hf_generate_bench.py
"""
import statistics
import time

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

NEW = 128
PROMPT = 512


def timed(model, ids, new):
    torch.cuda.synchronize()
    start = time.perf_counter()
    model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                   min_new_tokens=new, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def main():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=8192, n_positions=2048, n_embd=512, n_layer=4, n_head=8,
                        n_inner=2048, attn_implementation="eager")
    model = GPT2LMHeadModel(config).cuda().eval()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(0)}; GPT-2 4x512, 8 heads, float32, eager attention, "
          f"prompt {PROMPT}, greedy, {NEW} timed steps\n")
    print("| batch | ms/step | tok/s |")
    print("| --- | --- | --- |")
    with torch.inference_mode():
        for batch in (1, 16, 64):
            ids = torch.randint(0, 8192, (batch, PROMPT), device="cuda")
            timed(model, ids, 4)
            steps = []
            for _ in range(5):
                steps.append((timed(model, ids, 1 + NEW) - timed(model, ids, 1)) / NEW)
            step = statistics.median(steps)
            print(f"| {batch} | {step * 1e3:.3f} | {batch / step:.0f} |")


if __name__ == "__main__":
    main()
