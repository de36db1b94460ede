"""float64 references for every djl_attn operator, and the tolerance rules of the suite."""

import math

import torch

# DESIGN.md section 5: float32 ~1e-5 relative, fp16 ~2e-3, bf16 ~1e-2.
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}

POISON = float("nan")


def attention_mask(batch, seqlen_q, seqlen_k, causal, kv_lens=None, device="cpu"):
    """[B, 1, Sq, Sk] bool: True where query i may see key j.

    Keys past kv_lens[b] are hidden; with `causal` the diagonal is aligned to the bottom-right
    corner of each row's valid keys: j <= i + kv_len - Sq (FlashAttention's convention).
    """
    lens = (
        kv_lens.to(device="cpu", dtype=torch.int64)
        if kv_lens is not None
        else torch.full((batch,), seqlen_k, dtype=torch.int64)
    )
    i = torch.arange(seqlen_q)[:, None]
    j = torch.arange(seqlen_k)[None, :]
    masks = []
    for b in range(batch):
        m = j < lens[b]
        if causal:
            m = m & (j <= i + lens[b] - seqlen_q)
        masks.append(m)
    if batch == 0:
        return torch.zeros(0, 1, seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    return torch.stack(masks)[:, None].to(device)


def flash_attention(q, k, v, kv_lens, scale, causal):
    """Reference for djl_attn.flash_attention: (out [B,Sq,Hq,D] float64, lse [B,Hq,Sq] float64).

    Rows that see no key get output 0 and lse -inf.
    """
    batch, seqlen_q, heads_q, _ = q.shape
    seqlen_k, heads_kv = k.shape[1], k.shape[2]
    group = heads_q // heads_kv
    qd = q.double().transpose(1, 2)
    kd = k.double().transpose(1, 2).repeat_interleave(group, dim=1)
    vd = v.double().transpose(1, 2).repeat_interleave(group, dim=1)
    scores = qd @ kd.transpose(-1, -2) * scale
    mask = attention_mask(batch, seqlen_q, seqlen_k, causal, kv_lens, q.device)
    scores = scores.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return (probs @ vd).transpose(1, 2), lse


def assert_close(actual, expected, dtype, what="output"):
    """Max abs error within the dtype's tolerance, relative to max(1, |expected|)."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    actual = actual.double()
    assert not torch.isnan(actual).any(), "%s has NaN (unwritten or bad) elements" % what
    finite = torch.isfinite(expected)
    assert torch.equal(torch.isfinite(actual), finite), "%s: infinities differ" % what
    assert torch.equal(actual[~finite], expected[~finite]), "%s: infinities differ" % what
    if finite.any():
        err = (actual[finite] - expected[finite]).abs() / expected[finite].abs().clamp(min=1.0)
        assert err.max().item() <= TOLERANCE[dtype], "%s: max error %.3g > %.3g for %s" % (
            what,
            err.max().item(),
            TOLERANCE[dtype],
            dtype,
        )
