# Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
"""A tiny chat-capable checkpoint and transformers' own chat references, for the server's
/v1/chat/completions test.

    python make_chat.py DIR

writes, offline and deterministically:

- DIR: a random `LlamaForCausalLM` (GQA 4:2, float32) with a `PreTrainedTokenizerFast` saved by
  transformers' `save_pretrained`: tokenizer.json, tokenizer_config.json (bos <s>, eos </s>) and
  the chat template (TinyLlama's Zephyr-style template, which writes each turn as
  `<|role|>\\n content </s>`, plus a `raise_exception` for a conversation that opens with the
  assistant), wherever this transformers version puts it (chat_template.jinja or
  tokenizer_config.json);
- DIR/reference.json: conversations with `apply_chat_template(add_generation_prompt=True)`'s text
  and ids, and `generate`'s greedy continuation (do_sample=False, max_new_tokens 10, stopping at
  </s>) of the float64 checkpoint.
"""

import json
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CORPUS = [
    "Once upon a time there was a little girl named Lily.",
    "She liked to play in the park with her dog, who was very fast.",
    "What is the capital of France? The capital of France is Paris.",
    "Tell me a story about a boat. Tom had a small boat.",
    "You are a helpful assistant who answers briefly.",
    "Hello! How are you today? I am fine, thank you.",
]

SPECIAL = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]

TEMPLATE = (
    "{% if messages[0]['role'] == 'assistant' %}"
    "{{ raise_exception('Conversations must start with a system or user message') }}"
    "{% endif %}"
    "{% for message in messages %}\n"
    "{% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n"
    "{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n"
    "{{ '<|assistant|>' }}\n"
    "{% endif %}\n"
    "{% endfor %}"
)

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    [
        {"role": "user", "content": "Tell me a story."},
        {"role": "assistant", "content": "Once upon a time there was a boat."},
        {"role": "user", "content": "And then?"},
    ],
]

MAX_NEW = 10


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    raw = Tokenizer(models.BPE(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(CORPUS * 4, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=raw, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tok.chat_template = TEMPLATE
    config = LlamaConfig(
        vocab_size=raw.get_vocab_size(),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-6,
        rope_theta=500.0,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_((1 + 0.1 * torch.randn_like(p)) if "norm" in name else 0.1 * torch.randn_like(p))
    model.save_pretrained(out)
    tok.save_pretrained(out)

    # The references come from what was saved, loaded back.
    tok = PreTrainedTokenizerFast.from_pretrained(out)
    model = LlamaForCausalLM.from_pretrained(out, dtype=torch.float64, attn_implementation="eager")
    model.eval()
    cases = []
    for messages in CONVERSATIONS:
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        direct = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(direct, dict) or hasattr(direct, "keys"):
            direct = direct["input_ids"]
        assert list(direct) == ids, (direct, ids)
        with torch.no_grad():
            generated = model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                do_sample=False,
                max_new_tokens=MAX_NEW,
                eos_token_id=2,
                pad_token_id=0,
            )[0, len(ids):].tolist()
        cases.append(
            {
                "messages": messages,
                "text": text,
                "prompt": ids,
                "generated": generated,
                "generated_text": tok.decode(generated, skip_special_tokens=True),
            }
        )
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"cases": cases}, f)
    print(f"make_chat: {len(cases)} conversations, files {sorted(os.listdir(out))}")


if __name__ == "__main__":
    main()
