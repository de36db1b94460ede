# Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
"""Tiny random Hugging Face decoders and their outputs, the references of the Java decoder tests.

    python make_decoders.py DIR

writes, offline and deterministically:

- DIR/tokenizer.json: a byte-level BPE tokenizer trained with the `tokenizers` library on the
  small corpus below (special tokens <unk> 0, <s> 1, </s> 2; LLaMA-style checkpoints prepend <s>);
- DIR/llama: a `LlamaForCausalLM` with grouped-query attention (4 query heads, 2 KV heads),
  untied output projection, saved float32 in shards (small max_shard_size);
- DIR/llama3: a `LlamaForCausalLM` (GQA 4:2) with Llama-3 rope scaling (`rope_type: llama3`,
  factor 8, frequency factors 1 and 4, original context 32: its head dim 16's frequencies fall in
  all three bands), saved float32;
- DIR/llama_bf16: a `LlamaForCausalLM` with head_dim 32 != hidden_size / heads and tied
  embeddings, saved in bfloat16;
- DIR/gpt2: a `GPT2LMHeadModel` (tied embeddings) saved float32 in one file;
- DIR/gpt2_f16: a `GPT2LMHeadModel` with an untied lm_head and n_inner null, saved in float16;
- DIR/mistral: a `MistralForCausalLM` (LLaMA layout, GQA 4:2) with `sliding_window` 5, saved
  float32: every prompt plus its greedy steps is longer than the window;
- DIR/gemma2: a `Gemma2ForCausalLM` with 4 layers alternating sliding (window 4) and full
  attention (`layer_types`), head_dim 32 != hidden / heads, query_pre_attn_scalar 20 (a scale
  other than head_dim^-0.5), attention and final logit soft-capping small enough to change the
  outputs, tied embeddings, saved float32;
- DIR/<name>/reference.json for each: the prompts (text and the ids the tokenizer gives), the
  logits after every prompt position, and the greedy continuation (`generate`, do_sample=False,
  max_new_tokens 12) as ids and as text decoded with skip_special_tokens.

The references come from the saved checkpoint loaded back and run in float64 (eager attention),
so a float16/bfloat16 checkpoint's reference is that of its rounded weights. Each greedy
continuation is also checked against an argmax loop of full forwards without a cache (transformers'
sliding-window cache keeps only the last window - 1 keys: this proves the cached steps and the
mask agree). For mistral and gemma2 the script also runs the same weights with the window (and
the soft-caps) switched off and asserts the logits or the continuation change, so the fixtures
exercise what they claim. Weights are drawn
with a larger spread than the Hugging Face initialiser (std 0.1 instead of 0.02) so greedy steps
have clear top-1/top-2 margins; the smallest margin seen is written as `min_greedy_margin`.
"""

import json
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    Gemma2Config,
    Gemma2ForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
)

CORPUS = [
    "Once upon a time there was a little girl named Lily.",
    "She liked to play in the park with her dog, who was very fast.",
    "One day the sun was hot and the sky was blue, so they went to the river.",
    "The river was cold, but Lily laughed and splashed the water.",
    "Her mother called her home for dinner: soup, bread and a big red apple!",
    "Tom had a small boat. He took it to the lake every morning at 7 o'clock.",
    "\"Can I come too?\" asked Sam. Tom said yes, and they sailed together.",
    "The wind was strong; the boat went faster and faster across the water.",
    "At night the stars came out and the friends told stories by the fire.",
    "Numbers like 3, 14 and 2026 and symbols like % & # are in the text too.",
]

PROMPTS = [
    "Once",
    "Lily went to the park",
    "The boat sailed across the water and the wind",
    "At night the friends told stories by the fire, and then Tom said",
    "zebra quantum ~~ 42",
]

MAX_NEW = 12
MISTRAL_WINDOW = 5
GEMMA2_WINDOW = 4
# Scores and logits of the std-0.1 weights reach a few units: caps this small bend them.
GEMMA2_ATTN_SOFTCAP = 1.5
GEMMA2_FINAL_SOFTCAP = 3.0


def train_tokenizer(path):
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    return tok


def with_bos(tok):
    """A copy of the tokenizer that prepends <s>, as LLaMA tokenizers do."""
    copy = Tokenizer.from_str(tok.to_str())
    copy.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    return copy


def randomize(model, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.02 * torch.randn_like(p))
            elif "norm" in name or ".ln_" in name or name.endswith("ln_f.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))


def load64(model_cls, out, **overrides):
    """The saved checkpoint in float64 with eager attention; overrides replace config keys."""
    kwargs = {}
    if overrides:
        config = model_cls.config_class.from_pretrained(out)
        for key, value in overrides.items():
            setattr(config, key, value)
        kwargs["config"] = config
    model = model_cls.from_pretrained(
        out, dtype=torch.float64, attn_implementation="eager", **kwargs
    )
    model.eval()
    return model


def greedy_without_cache(model, ids, n):
    """Greedy ids by full forwards (no KV cache): the independent check of generate's cache."""
    seq = list(ids)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([seq]), use_cache=False).logits[0, -1]
            seq.append(int(torch.argmax(logits)))
    return seq[len(ids):]


def references(model_cls, out, tok):
    model = load64(model_cls, out)
    cases = []
    min_margin = float("inf")
    eos = model.generation_config.eos_token_id
    for text in PROMPTS:
        ids = tok.encode(text).ids
        x = torch.tensor([ids])
        with torch.no_grad():
            logits = model(x).logits[0]
            gen = model.generate(
                x,
                attention_mask=torch.ones_like(x),
                do_sample=False,
                max_new_tokens=MAX_NEW,
                pad_token_id=eos if eos is not None else 0,
                output_scores=True,
                return_dict_in_generate=True,
            )
        generated = gen.sequences[0, len(ids):].tolist()
        uncached = greedy_without_cache(model, ids, len(generated))
        assert uncached == generated, (out, text, generated, uncached)
        for step in gen.scores:
            top = torch.topk(step[0], 2).values
            min_margin = min(min_margin, float(top[0] - top[1]))
        cases.append(
            {
                "text": text,
                "prompt": ids,
                "logits": logits.tolist(),
                "generated": generated,
                "generated_text": tok.decode(generated, skip_special_tokens=True),
            }
        )
    return {
        "eos_token_id": eos,
        "max_new_tokens": MAX_NEW,
        "min_greedy_margin": min_margin,
        "cases": cases,
    }


def assert_changes(model_cls, out, tok, ref, what, **overrides):
    """Asserts that switching a feature off (config overrides) changes the reference: some
    prompt's logits by more than 1e-3, or its greedy continuation."""
    model = load64(model_cls, out, **overrides)
    worst = 0.0
    changed_ids = False
    for case in ref["cases"]:
        x = torch.tensor([case["prompt"]])
        with torch.no_grad():
            logits = model(x).logits[0]
        worst = max(worst, float((logits - torch.tensor(case["logits"])).abs().max()))
        ids = greedy_without_cache(model, case["prompt"], len(case["generated"]))
        changed_ids |= ids != case["generated"]
    assert worst > 1e-3 or changed_ids, (out, what, worst)
    print(
        f"make_decoders: {os.path.basename(out)}: without {what}: max |logit change| {worst:.3f},"
        f" continuations change: {changed_ids}"
    )


def save(model, model_cls, out, tok, dtype, shard):
    model = model.to(dtype)
    kwargs = {"max_shard_size": "40KB"} if shard else {}
    model.save_pretrained(out, **kwargs)
    tok.save(os.path.join(out, "tokenizer.json"))
    ref = references(model_cls, out, tok)
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)
    print(
        f"make_decoders: {os.path.basename(out)}: {dtype}, shards={shard},"
        f" min greedy margin {ref['min_greedy_margin']:.4f}"
    )
    return ref


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    tok = train_tokenizer(os.path.join(out, "tokenizer.json"))
    tok.save(os.path.join(out, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    bos_tok = with_bos(tok)

    def llama(seed, **kw):
        config = LlamaConfig(
            vocab_size=vocab,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            rms_norm_eps=1e-6,
            rope_theta=500.0,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
            attn_implementation="eager",
            **kw,
        )
        m = LlamaForCausalLM(config)
        randomize(m, seed)
        return m

    def gpt2(seed, **kw):
        config = GPT2Config(
            vocab_size=vocab,
            n_embd=64,
            n_layer=2,
            n_head=4,
            n_positions=96,
            bos_token_id=1,
            eos_token_id=2,
            attn_implementation="eager",
            **kw,
        )
        m = GPT2LMHeadModel(config)
        randomize(m, seed)
        return m

    def mistral(seed):
        config = MistralConfig(
            vocab_size=vocab,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            rms_norm_eps=1e-6,
            rope_theta=500.0,
            sliding_window=MISTRAL_WINDOW,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
            attn_implementation="eager",
        )
        m = MistralForCausalLM(config)
        randomize(m, seed)
        return m

    def gemma2(seed):
        config = Gemma2Config(
            vocab_size=vocab,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
            max_position_embeddings=128,
            rms_norm_eps=1e-6,
            rope_theta=500.0,
            query_pre_attn_scalar=20,
            sliding_window=GEMMA2_WINDOW,
            layer_types=["sliding_attention", "full_attention"] * 2,
            attn_logit_softcapping=GEMMA2_ATTN_SOFTCAP,
            final_logit_softcapping=GEMMA2_FINAL_SOFTCAP,
            hidden_activation="gelu_pytorch_tanh",
            tie_word_embeddings=True,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
            attn_implementation="eager",
        )
        m = Gemma2ForCausalLM(config)
        randomize(m, seed)
        return m

    save(llama(1, tie_word_embeddings=False), LlamaForCausalLM,
         os.path.join(out, "llama"), bos_tok, torch.float32, True)
    path = os.path.join(out, "llama3")
    scaled = {"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    ref = save(llama(5, tie_word_embeddings=False, rope_parameters=scaled), LlamaForCausalLM,
               path, bos_tok, torch.float32, False)
    assert_changes(LlamaForCausalLM, path, bos_tok, ref, "Llama-3 rope scaling",
                   rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    save(llama(2, head_dim=32, tie_word_embeddings=True), LlamaForCausalLM,
         os.path.join(out, "llama_bf16"), bos_tok, torch.bfloat16, False)
    save(gpt2(3, n_inner=160), GPT2LMHeadModel,
         os.path.join(out, "gpt2"), tok, torch.float32, False)
    save(gpt2(4, tie_word_embeddings=False, activation_function="gelu_pytorch_tanh"),
         GPT2LMHeadModel, os.path.join(out, "gpt2_f16"), tok, torch.float16, False)

    path = os.path.join(out, "mistral")
    ref = save(mistral(9), MistralForCausalLM, path, bos_tok, torch.float32, False)
    longest = max(len(c["prompt"]) for c in ref["cases"])
    assert min(len(c["prompt"]) + MAX_NEW for c in ref["cases"]) > MISTRAL_WINDOW, longest
    assert_changes(MistralForCausalLM, path, bos_tok, ref, "the window", sliding_window=None)
    # W keys (k > q - W), not W + 1: the window one longer gives other outputs.
    assert_changes(MistralForCausalLM, path, bos_tok, ref, "window W + 1",
                   sliding_window=MISTRAL_WINDOW + 1)

    path = os.path.join(out, "gemma2")
    ref = save(gemma2(12), Gemma2ForCausalLM, path, bos_tok, torch.float32, False)
    assert_changes(Gemma2ForCausalLM, path, bos_tok, ref, "the window",
                   layer_types=["full_attention"] * 4)
    assert_changes(Gemma2ForCausalLM, path, bos_tok, ref, "attention soft-capping",
                   attn_logit_softcapping=None)
    # tanh is monotone: the final cap never changes a greedy id, only the logits (asserted).
    assert_changes(Gemma2ForCausalLM, path, bos_tok, ref, "final soft-capping",
                   final_logit_softcapping=None)


if __name__ == "__main__":
    main()
