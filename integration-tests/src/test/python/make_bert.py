# Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
"""Reference fixture for the BERT encoder tests (io.djlattention.it.encoder.Bert*Test).

    python make_bert.py DIR

Writes, offline and deterministically:
  DIR/bert/       a random BertModel (hidden 60, 5 heads of dim 12, 3 layers, intermediate 100,
                  max positions 64) saved by save_pretrained, with a WordPiece tokenizer.json
                  made here with the tokenizers library from a built-in corpus
  DIR/bert-mlm/   a random BertForMaskedLM of the same sizes (decoder tied to the word embeddings)
  DIR/bert-fp16/  DIR/bert saved in float16; DIR/bert-bf16/ the same in bfloat16
  DIR/reference.json  what transformers computes (attn_implementation="eager", float64):
                  token ids of every sentence (the Hugging Face tokenizer, truncated to the 64
                  positions), last hidden states, mean- and CLS-pooled L2-normalised embeddings,
                  a padded batch of random ids with token types 0/1, the fill-mask top-5, and the
                  last hidden states of the float16/bfloat16 copies (from their rounded weights).
"""
import json
import os
import shutil
import sys

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import BertConfig, BertForMaskedLM, BertModel
from transformers.utils import logging as hf_logging

hf_logging.disable_progress_bar()

MAX_POSITIONS = 64

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A journey of a thousand miles begins with a single step.",
    "The cat sat on the mat and looked out of the window at the rain.",
    "Machine learning models turn text into vectors of numbers.",
    "Sentence embeddings place similar sentences close to each other.",
    "Attention lets every token look at every other token in the sequence.",
    "The weather today is sunny with a light breeze from the west.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
    "Java programs run on the virtual machine and call native code through JNI.",
    "Deep learning frameworks schedule kernels on graphics processing units.",
    "The library opens at nine in the morning and closes at six in the evening.",
    "Padding tokens carry no meaning, so a fast encoder skips them entirely.",
    "Birds sing in the trees while the children play football in the park.",
    "A transformer layer has self attention, a feed forward network and two layer norms.",
    "Coffee, tea, or hot chocolate: what would you like to drink this afternoon?",
    "The museum shows paintings, sculptures and old maps of the city.",
]

SENTENCES = [
    "",
    "Hello",
    "The cat sat on the mat.",
    "Attention lets every token look at every other token.",
    "UNSEEN wörds, ünïcödé and 数字 123 — tokenised with [UNK]?",
    "Deep learning frameworks schedule kernels on graphics processing units, and Java programs "
    "run on the virtual machine.",
    "The quick brown fox",
    # Longer than the 64 positions: truncated (the rule the Java translator follows too).
    " ".join(CORPUS[:6]),
]

FILL_MASK = [
    "The cat sat on the [MASK].",
    "[MASK] learning models turn text into vectors.",
    "She sells sea shells by the sea [MASK], and the shells are surely sea shells.",
]


def build_tokenizer():
    """A BERT WordPiece tokenizer over a vocabulary built here from the corpus, deterministically
    (the tokenizers library's WordPiece trainer numbers its vocabulary in hash-map order): the
    special tokens, every character alone and as a "##" continuation, a few common suffixes, and
    the corpus's most frequent words; other words split into pieces."""
    normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    pre = pre_tokenizers.BertPreTokenizer()
    counts = {}
    for line in CORPUS:
        for word, _ in pre.pre_tokenize_str(normalizer.normalize_str(line)):
            counts[word] = counts.get(word, 0) + 1
    chars = sorted({c for word in counts for c in word})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += chars + ["##" + c for c in chars]
    vocab += ["##ing", "##ed", "##er", "##ly", "##es", "##tion", "##s"]
    words = sorted((w for w in counts if len(w) > 1), key=lambda w: (-counts[w], w))
    vocab += [w for w in words[:120] if w not in vocab]
    tok = Tokenizer(
        models.WordPiece(
            vocab={t: i for i, t in enumerate(vocab)},
            unk_token="[UNK]",
            max_input_chars_per_word=100,
        )
    )
    tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def perturb(model, seed):
    """Non-trivial random parameters: transformers' init has zero biases and unit norms, which
    would hide a missing bias or a norm applied with the wrong parameters."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if "LayerNorm.weight" in name:
                p.copy_(1 + 0.1 * noise)
            elif name.endswith("bias"):
                p.copy_(0.1 * noise)
            elif "embeddings" in name:
                p.copy_(noise)
            else:
                p.copy_(0.2 * noise)


def config(vocab_size):
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=60,
        num_hidden_layers=3,
        num_attention_heads=5,
        intermediate_size=100,
        max_position_embeddings=MAX_POSITIONS,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
        hidden_act="gelu",
        pad_token_id=0,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def load_eager(cls, path):
    model = cls.from_pretrained(path, attn_implementation="eager", dtype=torch.float32)
    return model.double().eval()


def hidden_states(model, ids, type_ids, mask=None):
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(ids, dtype=torch.long),
            token_type_ids=torch.tensor(type_ids, dtype=torch.long),
            attention_mask=None if mask is None else torch.tensor(mask, dtype=torch.long),
        )
    return out.last_hidden_state


def main(out):
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    torch.manual_seed(0)
    tok = build_tokenizer()
    # A vocabulary larger than the tokenizer's: rows the tokenizer never produces, as in real
    # checkpoints whose vocab_size is padded.
    vocab_size = tok.get_vocab_size() + 7

    bert_dir = os.path.join(out, "bert")
    model = BertModel(config(vocab_size))
    perturb(model, 1)
    model.save_pretrained(bert_dir)
    tok.save(os.path.join(bert_dir, "tokenizer.json"))

    mlm_dir = os.path.join(out, "bert-mlm")
    mlm = BertForMaskedLM(config(vocab_size))
    perturb(mlm, 2)
    mlm.save_pretrained(mlm_dir)
    tok.save(os.path.join(mlm_dir, "tokenizer.json"))

    for name, dtype in (("bert-fp16", torch.float16), ("bert-bf16", torch.bfloat16)):
        d = os.path.join(out, name)
        BertModel.from_pretrained(bert_dir, dtype=torch.float32).to(dtype).save_pretrained(d)
        tok.save(os.path.join(d, "tokenizer.json"))

    # The references tokenise as a user of transformers would with truncation to the model's
    # maximum positions.
    tok.enable_truncation(max_length=MAX_POSITIONS)
    ref = {"max_length": MAX_POSITIONS, "vocab_size": vocab_size, "sentences": SENTENCES}
    eager = load_eager(BertModel, bert_dir)
    encodings, states, mean_emb, cls_emb = [], [], [], []
    for text in SENTENCES:
        enc = tok.encode(text)
        truncated = len(enc.overflowing) > 0
        encodings.append({"ids": enc.ids, "type_ids": enc.type_ids, "truncated": truncated})
        h = hidden_states(eager, [enc.ids], [enc.type_ids])[0]  # [L, C]
        states.append(h.tolist())
        mean_emb.append(torch.nn.functional.normalize(h.mean(0), dim=0).tolist())
        cls_emb.append(torch.nn.functional.normalize(h[0], dim=0).tolist())
    assert encodings[-1]["truncated"] and len(encodings[-1]["ids"]) == MAX_POSITIONS
    ref["encodings"] = encodings
    ref["last_hidden_state"] = states
    ref["embeddings_mean"] = mean_emb
    ref["embeddings_cls"] = cls_emb

    # A right-padded batch of random ids with token types 0 and 1, very different lengths.
    gen = torch.Generator().manual_seed(3)
    lens = [1, 64, 7, 33, 2]
    seq = max(lens)
    ids = torch.randint(0, vocab_size, (len(lens), seq), generator=gen)
    types = torch.randint(0, 2, (len(lens), seq), generator=gen)
    mask = torch.zeros(len(lens), seq, dtype=torch.long)
    for b, n in enumerate(lens):
        mask[b, :n] = 1
        ids[b, n:] = 0
        types[b, n:] = 0
    h = hidden_states(eager, ids.tolist(), types.tolist(), mask.tolist())
    h = h * mask.unsqueeze(-1)  # padding rows: only the valid rows are a reference
    ref["raw"] = {
        "input_ids": ids.tolist(),
        "token_type_ids": types.tolist(),
        "attention_mask": mask.tolist(),
        "last_hidden_state": h.tolist(),
    }

    mlm_eager = load_eager(BertForMaskedLM, mlm_dir)
    mask_id = tok.token_to_id("[MASK]")
    fill = []
    for text in FILL_MASK:
        enc = tok.encode(text)
        pos = enc.ids.index(mask_id)
        with torch.no_grad():
            logits = mlm_eager(
                input_ids=torch.tensor([enc.ids]),
                token_type_ids=torch.tensor([enc.type_ids]),
            ).logits[0, pos]
        top = torch.topk(logits, 6)
        gaps = (top.values[:-1] - top.values[1:]).min().item()
        # Well separated, so that float32 cannot reorder the top 5.
        assert gaps > 1e-3, f"fill-mask top-6 logits too close ({gaps}) for {text!r}"
        probs = torch.softmax(logits, 0)
        ids5 = top.indices[:5].tolist()
        fill.append(
            {
                "text": text,
                "ids": enc.ids,
                "mask_index": pos,
                "top5_ids": ids5,
                "top5_tokens": [tok.decode([i]) for i in ids5],
                "top5_probs": [probs[i].item() for i in ids5],
            }
        )
    ref["fill_mask"] = fill

    copies = {}
    for name in ("bert-fp16", "bert-bf16"):
        m = load_eager(BertModel, os.path.join(out, name))
        copies[name] = [
            hidden_states(m, [e["ids"]], [e["type_ids"]])[0].tolist() for e in encodings
        ]
    ref["dtype_copies"] = copies

    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)


if __name__ == "__main__":
    main(sys.argv[1])
