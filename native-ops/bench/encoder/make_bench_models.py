# Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
"""The models EncoderVsOrtBenchmark needs beyond the built-in MiniLM, made at bench time (nothing
large is committed):

    python make_bench_models.py MINILM_ONNX OUT_DIR

  OUT_DIR/minilm-int8.onnx  ONNX Runtime's own int8 MiniLM from the same file:
                            onnxruntime.quantization.quantize_dynamic with its defaults (int8
                            weights per tensor, activations uint8 per tensor at run time: what a
                            user of ORT's quantization tool gets)
  OUT_DIR/bert-base/        a random-weight BertModel of BERT-base's shape (hidden 768, 12 layers,
                            12 heads, intermediate 3072; seed 24), saved by save_pretrained
  OUT_DIR/bert-base.onnx    the same model exported for ONNX Runtime (input_ids, attention_mask,
                            token_type_ids -> last_hidden_state, dynamic batch and length)

Needs torch, transformers, onnx and onnxruntime (native-ops/scripts/bench-env.sh makes such a
venv from this machine's package sources). Skips what OUT_DIR already holds.
"""
import os
import sys

import torch
from transformers import BertConfig, BertModel


def bert_base(out_dir):
    model_dir = os.path.join(out_dir, "bert-base")
    onnx_path = os.path.join(out_dir, "bert-base.onnx")
    if os.path.isfile(onnx_path) and os.path.isdir(model_dir):
        return
    torch.manual_seed(24)
    model = BertModel(BertConfig(), add_pooling_layer=False).eval()
    model.save_pretrained(model_dir)
    ids = torch.randint(1000, 30000, (2, 16))
    mask = torch.ones_like(ids)
    types = torch.zeros_like(ids)
    axes = {0: "batch", 1: "seq"}

    class Hidden(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    with torch.no_grad():
        torch.onnx.export(Hidden(model), (ids, mask, types), onnx_path,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                        "token_type_ids": axes, "last_hidden_state": axes},
                          opset_version=17, dynamo=False)


def minilm_int8(minilm_onnx, out_dir):
    path = os.path.join(out_dir, "minilm-int8.onnx")
    if os.path.isfile(path):
        return
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(minilm_onnx, path, weight_type=QuantType.QInt8)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_bench_models.py MINILM_ONNX OUT_DIR")
    minilm_onnx, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    minilm_int8(minilm_onnx, out_dir)
    bert_base(out_dir)


if __name__ == "__main__":
    main()
