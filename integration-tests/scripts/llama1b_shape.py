"""The Llama-3.2-1B-shaped checkpoint of issue 22's benchmark, and its transformers anchors.

  python3 llama1b_shape.py write DIR   # real config, random weights (std 0.02), float16, written
                                       # by transformers' save_pretrained (safetensors)
  python3 llama1b_shape.py bench DIR   # transformers eager generate ms/step at batch 1, 16, 64
                                       # (prompt 1024), generate_batch (continuous batching,
                                       # CUDA graphs) where it runs, and time to first token of a
                                       # 2k prompt (sdpa), as Markdown; same GPU, same weights as
                                       # Java loads

Per decode step = (time of generate with 1 + N new tokens - time with 1 new token) / N: the
prefill and the first token are left out, as in CapturedStepBenchmark. Median of 3 after a warm-up.
"""
import statistics
import sys
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

PROMPT = 1024
NEW = 32


def config():
    return LlamaConfig(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, head_dim=64,
        max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128001,
        torch_dtype="float16")


def write(path):
    torch.manual_seed(0)
    model = LlamaForCausalLM(config()).to(torch.float16)
    model.save_pretrained(path, safe_serialization=True)
    size = sum(p.numel() for p in model.parameters()) * 2 / 1e9
    print(f"wrote {path}: {size:.2f} GB of float16 weights")


def timed(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def bench(path):
    model = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.float16,
                                             attn_implementation="eager").cuda().eval()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(0)}; {path} (float16), eager attention, prompt {PROMPT}, "
          f"greedy, {NEW} timed steps\n")
    print("| batch | transformers eager ms/step | tok/s |")
    print("| --- | --- | --- |")
    gen = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        for batch in (1, 16, 64):
            ids = torch.randint(0, 128256, (batch, PROMPT), generator=gen).cuda()

            def run(new):
                return lambda: model.generate(ids, attention_mask=torch.ones_like(ids),
                                              max_new_tokens=new, min_new_tokens=new,
                                              do_sample=False, pad_token_id=0)

            timed(run(2))
            per_step = statistics.median(
                (timed(run(1 + NEW)) - timed(run(1))) / NEW for _ in range(3))
            print(f"| {batch} | {per_step * 1e3:.2f} | {batch / per_step:.1f} |")
        del model
        sdpa = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.float16,
                                                attn_implementation="sdpa").cuda().eval()
        generate_batch_anchor(sdpa, gen)
        ids = torch.randint(0, 128256, (1, 2048), generator=gen).cuda()
        ttft = lambda: sdpa.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=1,
                                     min_new_tokens=1, do_sample=False, pad_token_id=0)
        timed(ttft)
        t = statistics.median(timed(ttft) for _ in range(3))
        print(f"\ntransformers sdpa time to first token, one 2048-token prompt: {t * 1e3:.1f} ms")


def generate_batch_anchor(model, gen):
    """transformers' own continuous batching (`generate_batch`: a paged cache and CUDA graphs),
    the anchor a careful transformers user would pick over eager `generate`; reported as it ran,
    or with the error that stopped it on this machine. Per step: from each request's `lifespan`
    (scheduled -> finished, measured by the manager), the median over the batch of
    (lifespan with 1 + N new tokens - lifespan with 1) / N; median of 3. (A call's set-up and
    graph warm-up come before any lifespan starts and vary by more than 32 steps take, so two
    calls' wall times measure nothing (on an H100 they gave negative steps); transformers 5.17
    left `timestamps` empty and `lifespan` unset there, which the table then says.)"""
    from transformers import GenerationConfig

    print("\n| batch | transformers generate_batch ms/step | tok/s |")
    print("| --- | --- | --- |")
    for batch in (1, 16, 64):
        prompts = torch.randint(0, 128256, (batch, PROMPT), generator=gen).tolist()

        def lifespans(new):
            config = GenerationConfig(max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                      eos_token_id=-1, pad_token_id=0)
            out = model.generate_batch(prompts, generation_config=config, progress_bar=False)
            spans = [o.lifespan[1] - o.lifespan[0] for o in out.values() if o.lifespan[0] >= 0]
            if len(spans) != len(out):
                raise RuntimeError("generate_batch's outputs carry no per-request times here "
                                   "(lifespan unset, timestamps empty)")
            return spans

        def step_ms():
            long, short = lifespans(1 + NEW), lifespans(1)
            per_step = (statistics.median(long) - statistics.median(short)) * 1e3 / NEW
            # A 1B decode step takes well over 0.1 ms on any GPU here: a smaller or negative
            # difference means the lifespans do not time the decode (on an H100 with
            # transformers 5.17 the difference was 0.00 ms).
            if per_step < 0.1:
                raise RuntimeError("generate_batch's lifespans do not time the decode: median "
                                   "lifespan %.3f ms with %d new tokens, %.3f ms with 1"
                                   % (statistics.median(long) * 1e3, 1 + NEW,
                                      statistics.median(short) * 1e3))
            return per_step

        try:
            step_ms()
            per_step = statistics.median(step_ms() for _ in range(3))
            print(f"| {batch} | {per_step:.2f} | {batch / per_step * 1e3:.1f} |")
        except Exception as e:  # reported, not hidden: the table says why there is no number
            message = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
            print(f"| {batch} | failed: {type(e).__name__}: {message} | |")


if __name__ == "__main__":
    {"write": write, "bench": bench}[sys.argv[1]](sys.argv[2])
