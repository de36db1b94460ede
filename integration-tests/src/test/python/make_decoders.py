# Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
"""Tiny random Hugging Face decoders and their outputs, the references of the Java decoder tests.

    python make_decoders.py DIR

writes, offline and deterministically:

- DIR/tokenizer.json: a byte-level BPE tokenizer trained with the `tokenizers` library on the
  small corpus below (special tokens <unk> 0, <s> 1, </s> 2; LLaMA-style checkpoints prepend <s>);
- DIR/llama: a `LlamaForCausalLM` with grouped-query attention (4 query heads, 2 KV heads),
  untied output projection, saved float32 in shards (small max_shard_size);
- DIR/llama_bf16: a `LlamaForCausalLM` with head_dim 32 != hidden_size / heads and tied
  embeddings, saved in bfloat16;
- DIR/gpt2: a `GPT2LMHeadModel` (tied embeddings) saved float32 in one file;
- DIR/gpt2_f16: a `GPT2LMHeadModel` with an untied lm_head and n_inner null, saved in float16;
- DIR/<name>/reference.json for each: the prompts (text and the ids the tokenizer gives), the
  logits after every prompt position, and the greedy continuation (`generate`, do_sample=False,
  max_new_tokens 12) as ids and as text decoded with skip_special_tokens.

The references come from the saved checkpoint loaded back and run in float64 (eager attention),
so a float16/bfloat16 checkpoint's reference is that of its rounded weights. Weights are drawn
with a larger spread than the Hugging Face initialiser (std 0.1 instead of 0.02) so greedy steps
have clear top-1/top-2 margins; the smallest margin seen is written as `min_greedy_margin`.
"""

import json
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

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


def references(model_cls, out, tok):
    model = model_cls.from_pretrained(out, dtype=torch.float64, attn_implementation="eager")
    model.eval()
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

    save(llama(1, tie_word_embeddings=False), LlamaForCausalLM,
         os.path.join(out, "llama"), bos_tok, torch.float32, True)
    save(llama(2, head_dim=32, tie_word_embeddings=True), LlamaForCausalLM,
         os.path.join(out, "llama_bf16"), bos_tok, torch.bfloat16, False)
    save(gpt2(3, n_inner=160), GPT2LMHeadModel,
         os.path.join(out, "gpt2"), tok, torch.float32, False)
    save(gpt2(4, tie_word_embeddings=False, activation_function="gelu_pytorch_tanh"),
         GPT2LMHeadModel, os.path.join(out, "gpt2_f16"), tok, torch.float16, False)


if __name__ == "__main__":
    main()
