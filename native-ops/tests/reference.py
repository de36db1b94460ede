"""float64 references for every djl_attn operator, and the tolerance rules of the suite."""

import math

import torch

# Tolerances from the method (float32 accumulation; the rounding of the input dtype dominates):
# float32 ~1e-5 relative, fp16 ~2e-3, bf16 ~1e-2.
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}

POISON = float("nan")


def attention_mask(batch, seqlen_q, seqlen_k, causal, kv_lens=None, device="cpu",
                   window_left=-1, window_right=-1):
    """[B, 1, Sq, Sk] bool: True where query i may see key j.

    Keys past kv_lens[b] are hidden; with `causal` the diagonal is aligned to the bottom-right
    corner of each row's valid keys: j <= i + kv_len - Sq (FlashAttention's convention). A
    sliding window (FlashAttention-2's, -1 = unbounded side) keeps j >= i + o - window_left and
    j <= i + o + window_right, o = kv_len - Sq.
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
        pos = i + lens[b] - seqlen_q
        if causal:
            m = m & (j <= pos)
        if window_left >= 0:
            m = m & (j >= pos - window_left)
        if window_right >= 0:
            m = m & (j <= pos + window_right)
        masks.append(m)
    if batch == 0:
        return torch.zeros(0, 1, seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    return torch.stack(masks)[:, None].to(device)


def flash_attention(q, k, v, kv_lens, scale, causal, window_left=-1, window_right=-1,
                    softcap=0.0, alibi_slopes=None):
    """Reference for djl_attn.flash_attention: (out [B,Sq,Hq,D] float64, lse [B,Hq,Sq] float64).

    Scores are scale * q.k, soft-capped to softcap * tanh(s / softcap) when softcap > 0, then
    given the ALiBi bias -slope * |i + o - j| (slopes [Hq] or [B, Hq]); masked by
    attention_mask. Rows that see no key get output 0 and lse -inf.
    """
    batch, seqlen_q, heads_q, _ = q.shape
    seqlen_k, heads_kv = k.shape[1], k.shape[2]
    group = heads_q // heads_kv
    qd = q.double().transpose(1, 2)
    kd = k.double().transpose(1, 2).repeat_interleave(group, dim=1)
    vd = v.double().transpose(1, 2).repeat_interleave(group, dim=1)
    scores = qd @ kd.transpose(-1, -2) * scale
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    if alibi_slopes is not None and batch > 0:
        lens = (kv_lens.cpu().long() if kv_lens is not None
                else torch.full((batch,), seqlen_k, dtype=torch.long))
        slopes = alibi_slopes.double().cpu().expand(batch, heads_q)
        i = torch.arange(seqlen_q)[:, None]
        j = torch.arange(seqlen_k)[None, :]
        distance = torch.stack([(i + int(lens[b]) - seqlen_q - j).abs() for b in range(batch)])
        bias = -slopes[:, :, None, None] * distance[:, None].double()  # [B, Hq, Sq, Sk]
        scores = scores + bias.to(scores.device)
    mask = attention_mask(batch, seqlen_q, seqlen_k, causal, kv_lens, q.device, window_left,
                          window_right)
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


def causal_dot_product(q, k, v):
    """Reference for djl_attn.causal_dot_product: [B, H, L, M] float64.

    The O(L^2) masked form: out_j = sum_{i <= j} (q_j . k_i) v_i.
    """
    qd, kd, vd = q.double(), k.double(), v.double()
    scores = qd @ kd.transpose(-1, -2)
    seqlen = q.shape[-2]
    mask = torch.ones(seqlen, seqlen, dtype=torch.bool, device=q.device).tril()
    return scores.masked_fill(~mask, 0.0) @ vd


def _bias(bias):
    return 0.0 if bias is None else bias.double()


def add_bias_residual_layernorm(x, bias, residual, gamma, beta, eps):
    """Reference for djl_attn.add_bias_residual_layernorm: LayerNorm(x + bias + residual), float64."""
    v = x.double() + _bias(bias) + residual.double()
    mean = v.mean(-1, keepdim=True)
    var = ((v - mean) ** 2).mean(-1, keepdim=True)
    return (v - mean) / torch.sqrt(var + eps) * gamma.double() + beta.double()


def add_bias_gelu(x, bias, tanh_approximation):
    """Reference for djl_attn.add_bias_gelu, float64: erf form, or the tanh approximation."""
    v = x.double() + _bias(bias)
    if tanh_approximation:
        return 0.5 * v * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))
    return 0.5 * v * (1.0 + torch.erf(v / math.sqrt(2.0)))


def add_bias_residual_affine(x, bias, residual, scale, shift):
    """Reference for djl_attn.add_bias_residual_affine: (x + bias + residual) * scale + shift."""
    return (x.double() + _bias(bias) + residual.double()) * scale.double() + shift.double()


def bert_attention(qkv, qkv_bias, kv_lens, num_heads, scale):
    """Reference for djl_attn.bert_attention: [B, S, H * D] float64.

    Not causal; keys >= kv_lens[b] are masked; every query row is computed (padding rows too);
    a row with no valid key gives 0, as flash_attention does.
    """
    batch, seqlen, width = qkv.shape
    hidden = width // 3
    dim = hidden // num_heads
    v = qkv.double() + _bias(qkv_bias)
    q, k, vv = (t.reshape(batch, seqlen, num_heads, dim) for t in v.split(hidden, dim=-1))
    out, _ = flash_attention(q, k, vv, kv_lens, scale, False)
    return out.reshape(batch, seqlen, hidden)


def remove_padding(x, lens):
    """Reference for djl_attn.remove_padding: (packed [total, C], cu_seqlens int32 [B + 1])."""
    lens = lens.cpu().long()
    cu = torch.zeros(len(lens) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(lens, 0).to(torch.int32)
    rows = [x[b, : int(lens[b])] for b in range(len(lens))]
    packed = torch.cat(rows) if rows else x.new_zeros(0, x.shape[-1])
    return packed, cu


def restore_padding(packed, cu_seqlens, seqlen):
    """Reference for djl_attn.restore_padding: [B, seqlen, C] with zeros past each length."""
    cu = cu_seqlens.cpu().long()
    batch = len(cu) - 1
    out = packed.new_zeros(batch, seqlen, packed.shape[-1])
    for b in range(batch):
        out[b, : int(cu[b + 1] - cu[b])] = packed[int(cu[b]) : int(cu[b + 1])]
    return out


def gather_paged(cache, block_table, length):
    """The first `length` tokens of one sequence from a paged cache
    [num_blocks, block_size, Hkv, D], through its block table row: [length, Hkv, D]."""
    block_size = cache.shape[1]
    used = (length + block_size - 1) // block_size
    blocks = block_table[:used].to(device=cache.device, dtype=torch.long)
    return cache[blocks].reshape(-1, cache.shape[2], cache.shape[3])[:length]


def paged_prefill_attention(query, key_cache, value_cache, block_tables, cu_seqlens_q, context_lens,
                            scale, alibi_slopes=None, window_left=-1, softcap=0.0, causal=True,
                            window_right=-1, key=None, value=None, own_rows_min_chunk=2):
    """Reference for djl_attn.paged_prefill_attention: [T, Hq, D] float64.

    The n rows of sequence s are the last n positions p = ctx - n + t of its context (negative
    ones when n > ctx: FlashAttention's bottom-right alignment) and see keys j <= p when
    `causal` (else every key, or j <= p + window_right when window_right >= 0), and
    j >= p - window_left when window_left >= 0; scores scale * q.k are soft-capped to
    softcap * tanh(s / softcap) when softcap > 0, then get the ALiBi bias -slope * |j - p|
    (slope * (j - p) on the causal keys; slopes [Hq], or [num_seqs, Hq] with row s for sequence
    s). Rows that see no key get output 0. With the chunks' own keys and values `key` / `value`
    [T, Hkv, D], the last n keys of sequence s are their rows [cu[s], cu[s+1]) (exact), the first
    ctx - n the caches' (pass dequantised values for an fp8 cache), for every chunk of
    own_rows_min_chunk <= n <= ctx (2: a chunk of one, a decode row, reads the cache).
    """
    tables = block_tables.cpu()
    lens = context_lens.cpu().tolist()
    cu = cu_seqlens_q.cpu().tolist()
    heads_q = query.shape[1]
    out = torch.zeros(query.shape, dtype=torch.float64, device=query.device)
    for s, ctx in enumerate(lens):
        n = cu[s + 1] - cu[s]
        if n == 0:
            continue
        group = heads_q // key_cache.shape[2]
        k = gather_paged(key_cache, tables[s], ctx).double()
        v = gather_paged(value_cache, tables[s], ctx).double()
        if key is not None and own_rows_min_chunk <= n <= ctx:
            k = torch.cat([k[: ctx - n], key[cu[s] : cu[s + 1]].double().to(k.device)])
            v = torch.cat([v[: ctx - n], value[cu[s] : cu[s + 1]].double().to(v.device)])
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        q = query[cu[s] : cu[s + 1]].double()
        scores = torch.einsum("thd,jhd->htj", q, k) * scale  # [Hq, n, ctx]
        if softcap > 0:
            scores = softcap * torch.tanh(scores / softcap)
        pos = torch.arange(n, device=query.device)[:, None] + (ctx - n)
        j = torch.arange(ctx, device=query.device)[None, :]
        if alibi_slopes is not None:
            slopes = alibi_slopes[s] if alibi_slopes.dim() == 2 else alibi_slopes
            scores = scores - slopes.double()[:, None, None] * (j - pos).abs()[None]
        visible = (j <= pos) if causal else torch.ones_like(j - pos, dtype=torch.bool)
        if not causal and window_right >= 0:
            visible = visible & (j <= pos + window_right)
        if window_left >= 0:
            visible = visible & (j >= pos - window_left)
        scores = scores.masked_fill(~visible[None], -math.inf)
        probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        out[cu[s] : cu[s + 1]] = torch.einsum("htj,jhd->thd", probs, v)
    return out


def paged_attention(query, key_cache, value_cache, block_tables, context_lens, scale,
                    alibi_slopes=None, window_left=-1, softcap=0.0):
    """Reference for djl_attn.paged_attention: [num_seqs, Hq, D] float64 (one query per
    sequence at position ctx - 1; context 0 gives 0)."""
    num_seqs = query.shape[0]
    cu = torch.arange(num_seqs + 1, dtype=torch.int32)
    return paged_prefill_attention(query, key_cache, value_cache, block_tables, cu, context_lens,
                                   scale, alibi_slopes, window_left, softcap)


def poison_allocator(device, *shapes_and_dtypes):
    """Fills the CUDA caching allocator's free blocks with NaN before an operator allocates.

    The operators allocate their outputs (and scratch) themselves, so the outputs cannot be
    poisoned directly. Allocating NaN-filled tensors of the sizes the call will ask for and
    freeing them leaves those blocks cached, and the allocator's best fit hands them back to
    the operator: an element the kernel never writes then reads as NaN. A 64 MiB block covers
    larger scratch. No effect on the CPU (its allocator returns memory to malloc).
    """
    if torch.device(device).type != "cuda":
        return
    blocks = [torch.full((16 << 20,), POISON, dtype=torch.float32, device=device)]
    for shape, dtype in shapes_and_dtypes:
        blocks.append(torch.full(shape, POISON, dtype=dtype, device=device))
    del blocks


def flash_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, scale, causal, window_left=-1,
                           window_right=-1, softcap=0.0, alibi_slopes=None):
    """Reference for djl_attn.flash_attention_varlen, one sequence at a time through the dense
    reference: (out [total_q, Hq, D] float64, lse [Hq, total_q] float64). ALiBi slopes [B, Hq]
    give sequence b row b."""
    cu_q = cu_seqlens_q.cpu().tolist()
    cu_k = cu_seqlens_k.cpu().tolist()
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    lse = torch.full((q.shape[1], q.shape[0]), -math.inf, dtype=torch.float64, device=q.device)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0:
            continue
        slopes = None
        if alibi_slopes is not None:
            slopes = alibi_slopes[b] if alibi_slopes.dim() == 2 else alibi_slopes
        o, l = flash_attention(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], None, scale, causal,
                               window_left, window_right, softcap, slopes)
        out[q0:q1] = o[0]
        lse[:, q0:q1] = l[0]
    return out, lse


# ---- FP8: e4m3fn and e5m2 KV caches, flash_attention_fp8 ----------------------------------------

FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
FP8_E5M2_MAX = 57344.0  # torch.finfo(torch.float8_e5m2).max


def _head_scale(scale, heads_kv, device):
    """A scale [1] or [Hkv] (None: 1) as float32 [Hkv, 1], broadcasting over [.., Hkv, D]."""
    if scale is None:
        return torch.ones(heads_kv, 1, device=device)
    return scale.float().to(device).expand(heads_kv)[:, None]


def fp8_quantise(x, scale, e5m2=False):
    """What reshape_and_cache writes to an fp8 cache for rows x [.., Hkv, D]: uint8 bytes of
    sat(round_to_nearest_even(x / scale)) in e4m3fn (or e5m2), through torch's own float8 cast
    (which rounds to nearest even; the clamp saturates, where the cast alone would give NaN in
    e4m3fn and infinity in e5m2)."""
    y = x.float() / _head_scale(scale, x.shape[-2], x.device)
    dtype, limit = (torch.float8_e5m2, FP8_E5M2_MAX) if e5m2 else (torch.float8_e4m3fn, FP8_MAX)
    return y.clamp(-limit, limit).to(dtype).view(torch.uint8)


def fp8_dequantise(cache, scale, e5m2=False):
    """The values an fp8 cache [.., Hkv, D] (uint8, float8_e4m3fn or float8_e5m2) holds: byte *
    scale, in float64 (exact: an e4m3fn or e5m2 value times a float32 scale has at most 28
    significant bits). A float8_e5m2 cache is e5m2 whatever `e5m2` says."""
    e5m2 = e5m2 or cache.dtype == torch.float8_e5m2
    values = cache.view(torch.float8_e5m2 if e5m2 else torch.float8_e4m3fn).double()
    return values * _head_scale(scale, cache.shape[-2], cache.device).double()


def fp8_descaled(x, descale):
    """The values of flash_attention_fp8's q, k or v: e4m3fn bytes x [B, S, H, D]
    (float8_e4m3fn or uint8) times the descale of each row's (batch row, key/value head), in
    float64 (exact). descale: None (1), [1], or [B, Hkv], where query head h of Hq takes the factor
    of key/value head h // (Hq // Hkv)."""
    values = x.view(torch.float8_e4m3fn).double()
    if descale is None:
        return values
    d = descale.double().to(x.device)
    if d.dim() == 1:
        return values * d[0]
    group = x.shape[2] // d.shape[1]
    return values * d.repeat_interleave(group, dim=1)[:, None, :, None]


FP8_P_SCALE = 256.0  # 2^8: P in [0, 1] is scaled into e4m3's range before it is rounded


def flash_attention_fp8(q, k, v, kv_lens, scale, causal, q_descale=None, k_descale=None,
                        v_descale=None, round_p=False):
    """Reference for djl_attn.flash_attention_fp8: (out [B,Sq,Hq,D] float64, lse [B,Hq,Sq]
    float64), the attention of the dequantized inputs (fp8_descaled) as flash_attention's.

    round_p: P rounded to e4m3 as FlashAttention-3's FP8 kernel does it: P = exp(s - rowmax)
    times FP8_P_SCALE, rounded through torch.float8_e4m3fn before P @ V, the product divided by
    FP8_P_SCALE * rowsum, the row sum taken over the unrounded P. The lse is the same either way.
    """
    qd = fp8_descaled(q, q_descale)
    kd = fp8_descaled(k, k_descale)
    vd = fp8_descaled(v, v_descale)
    out, lse = flash_attention(qd, kd, vd, kv_lens, scale, causal)
    if not round_p:
        return out, lse
    batch, seqlen_q, heads_q, _ = q.shape
    seqlen_k, heads_kv = k.shape[1], k.shape[2]
    group = heads_q // heads_kv
    qh = qd.transpose(1, 2)
    kh = kd.transpose(1, 2).repeat_interleave(group, dim=1)
    vh = vd.transpose(1, 2).repeat_interleave(group, dim=1)
    scores = qh @ kh.transpose(-1, -2) * scale
    mask = attention_mask(batch, seqlen_q, seqlen_k, causal, kv_lens, q.device)
    scores = scores.masked_fill(~mask, -math.inf)
    row_max = scores.amax(dim=-1, keepdim=True)
    p = torch.exp(scores - row_max).nan_to_num(0.0)  # rows without keys: 0
    row_sum = p.sum(dim=-1, keepdim=True)
    p_rounded = (p * FP8_P_SCALE).to(torch.float8_e4m3fn).double()
    out_pq = (p_rounded @ vh) / (FP8_P_SCALE * row_sum)
    return out_pq.nan_to_num(0.0).transpose(1, 2), lse


# ---- decoder_layer --------------------------------------------------------------------------------

# The schema's enums.
NORM_RMS, NORM_LAYER = 0, 1
ACT_SWIGLU, ACT_GEGLU_TANH, ACT_GELU_TANH = 0, 1, 2


def llama3_inv_freq(head_dim, theta, factor, low_freq_factor, high_freq_factor, original_max):
    """Llama-3's scaled RoPE frequencies (transformers' _compute_llama3_parameters), float64."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    low_wavelen = original_max / low_freq_factor
    high_wavelen = original_max / high_freq_factor
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (original_max / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope_cos_sin(num_positions, inv_freq):
    """decoder_layer's rotary table: float32 [P, R], the cos of the R/2 frequencies then their
    sin, per position (computed in float64)."""
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * inv_freq.double()[None]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).float()


def _norm(x, weight, bias, norm_type, eps):
    if norm_type == NORM_LAYER:
        x = x - x.mean(-1, keepdim=True)
    y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight.to(x.dtype)
    return y if bias is None else y + bias.to(x.dtype)


def _rotate(x, positions, table, interleaved):
    """x [T, H, D] turned by each position's angles on its first R dims."""
    rope_dim = table.shape[1]
    half = rope_dim // 2
    cos = table[positions.long(), :half].to(x.dtype)[:, None]
    sin = table[positions.long(), half:].to(x.dtype)[:, None]
    x = x.clone()
    if interleaved:
        a, b = x[..., 0:rope_dim:2].clone(), x[..., 1:rope_dim:2].clone()
        x[..., 0:rope_dim:2] = a * cos - b * sin
        x[..., 1:rope_dim:2] = b * cos + a * sin
    else:
        a, b = x[..., :half].clone(), x[..., half:rope_dim].clone()
        x[..., :half] = a * cos - b * sin
        x[..., half:rope_dim] = b * cos + a * sin
    return x


def _gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


def decoder_layer_qkv(hidden, positions, w, num_heads, heads_kv, norm_type, eps,
                      rope_interleaved, dtype=torch.float64):
    """The first half of decoder_layer, computed in `dtype`: q [T, Hq, D], k and v [T, Hkv, D]
    after the input norm, the qkv projection and RoPE."""
    x = hidden.to(dtype)
    h = _norm(x, w["attn_norm_weight"], w.get("attn_norm_bias"), norm_type, eps)
    qkv = h @ w["qkv_weight"].to(dtype).T
    if w.get("qkv_bias") is not None:
        qkv = qkv + w["qkv_bias"].to(dtype)
    tokens = x.shape[0]
    dim = qkv.shape[1] // (num_heads + 2 * heads_kv)
    qkv = qkv.reshape(tokens, num_heads + 2 * heads_kv, dim)
    q, k, v = qkv[:, :num_heads], qkv[:, num_heads:num_heads + heads_kv], qkv[:, num_heads + heads_kv:]
    if w.get("rope_cos_sin") is not None:
        q = _rotate(q, positions, w["rope_cos_sin"], rope_interleaved)
        k = _rotate(k, positions, w["rope_cos_sin"], rope_interleaved)
    return q, k, v


def write_cache(cache, rows, slot_mapping, scale=None):
    """A copy of `cache` [num_blocks, block_size, Hkv, D] with rows [T, Hkv, D] in their slots
    (negative: skipped): as reshape_and_cache writes them (fp8 caches: fp8_quantise)."""
    out = cache.clone()
    flat = out.view(-1, cache.shape[2], cache.shape[3])
    keep = slot_mapping >= 0
    values = fp8_quantise(rows, scale) if cache.dtype == torch.uint8 else rows.to(cache.dtype)
    flat[slot_mapping[keep].long()] = values[keep]
    return out


def decoder_layer_rest(hidden, q, key_cache, value_cache, block_tables, cu_seqlens_q,
                       context_lens, w, norm_type, activation, eps, scale, window_left, softcap,
                       k_scale=None, v_scale=None, dtype=torch.float64, new_k=None, new_v=None,
                       e5m2=False):
    """The second half of decoder_layer, computed in `dtype` from q and the caches written with
    the step's keys and values: the new hidden [T, C]. With new_k / new_v [T, Hkv, D] the chunks
    of two or more tokens attend their own tokens from them and only their prefixes from the
    caches; chunks of one (decode rows) read theirs from the caches (decoder_layer's rule)."""
    if key_cache.dtype == torch.uint8:
        kc = fp8_dequantise(key_cache, k_scale, e5m2)
        vc = fp8_dequantise(value_cache, v_scale, e5m2)
    else:
        kc, vc = key_cache, value_cache
    attn = paged_prefill_attention(q, kc, vc, block_tables, cu_seqlens_q, context_lens, scale,
                                   window_left=window_left, softcap=softcap, key=new_k,
                                   value=new_v).to(dtype)
    x = hidden.to(dtype)
    o = attn.reshape(x.shape[0], -1) @ w["out_weight"].to(dtype).T
    if w.get("out_bias") is not None:
        o = o + w["out_bias"].to(dtype)
    if w.get("attn_out_norm_weight") is not None:
        o = _norm(o, w["attn_out_norm_weight"], None, NORM_RMS, eps)
    x = x + o
    h = _norm(x, w["mlp_norm_weight"], w.get("mlp_norm_bias"), norm_type, eps)
    u = h @ w["up_weight"].to(dtype).T
    if w.get("up_bias") is not None:
        u = u + w["up_bias"].to(dtype)
    if activation == ACT_GELU_TANH:
        a = _gelu_tanh(u)
    else:
        gate, up = u.chunk(2, dim=-1)
        a = (torch.nn.functional.silu(gate) if activation == ACT_SWIGLU else _gelu_tanh(gate)) * up
    d = a @ w["down_weight"].to(dtype).T
    if w.get("down_bias") is not None:
        d = d + w["down_bias"].to(dtype)
    if w.get("mlp_out_norm_weight") is not None:
        d = _norm(d, w["mlp_out_norm_weight"], None, NORM_RMS, eps)
    return x + d


# ---- sample_tokens -------------------------------------------------------------------------------

_MASK32 = 0xFFFFFFFF


def philox4x32_10(counter, key):
    """Philox4x32-10 (Salmon et al., SC 2011) on Python ints: four 32-bit words of counter, two of
    key; returns four 32-bit words."""
    c = list(counter)
    k0, k1 = key
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & _MASK32, p1 & _MASK32,
             ((p0 >> 32) ^ c[3] ^ k1) & _MASK32, p0 & _MASK32]
        k0 = (k0 + 0x9E3779B9) & _MASK32
        k1 = (k1 + 0xBB67AE85) & _MASK32
    return c


def sample_uniform_bits(seed, offset):
    """sample_tokens' 64 random bits of a row: Philox keyed by the seed, counting by the offset
    (both int64, taken as their two's-complement 64-bit patterns)."""
    s, o = seed & 0xFFFFFFFFFFFFFFFF, offset & 0xFFFFFFFFFFFFFFFF
    out = philox4x32_10([o & _MASK32, o >> 32, 0, 0], [s & _MASK32, s >> 32])
    return out[0] | (out[1] << 32)


def sampling_probabilities(logits, temperature, top_k, top_p):
    """[V] float64: the distribution sample_tokens draws one row from, as the zoo's TokenSampler
    defines it: softmax(logits / T) over the logits >= the k-th largest (top_k 0: all), then the
    most likely of those (ties by the lower id) until their weight reaches top_p of the total,
    renormalised. `logits` is one row (any float dtype); every value finite."""
    x = logits.double().cpu()
    v = x.numel()
    k = v if top_k <= 0 or top_k >= v else top_k
    keep = x >= torch.sort(x, descending=True).values[k - 1]
    w = torch.where(keep, torch.exp((x - x.max()) / temperature), torch.zeros_like(x))
    if top_p < 1:
        order = torch.sort(-w, stable=True).indices
        cum = torch.cumsum(w[order], 0)
        n = int(torch.searchsorted(cum, top_p * cum[-1])) + 1
        nucleus = torch.zeros_like(w)
        nucleus[order[:n]] = w[order[:n]]
        w = nucleus
    return w / w.sum()


def encoder_layer(hidden, cu_seqlens, w, num_heads, eps, scale, gelu_tanh, gemm_dtype=None):
    """Reference for djl_attn.encoder_layer: one post-norm BERT layer over packed tokens [T, C],
    each sequence attending to its own tokens only, in float64. `gemm_dtype` (e.g. bfloat16)
    rounds every GEMM's operands and result to that dtype, as the bfloat16 mode does; int8
    quantizes the activations per row and the weight per output channel (symmetric, scale
    max |row| / 127, round half to even), as the int8 mode does, and multiplies exactly."""
    x = hidden.double()
    t, c = x.shape
    d = c // num_heads

    def int8_rows(m):
        amax = m.abs().amax(dim=1, keepdim=True)
        scale = torch.where(amax > 0, amax / 127, torch.ones_like(amax))
        return torch.round(m / scale).clamp(-127, 127) * scale

    def linear(a, name):
        weight = w[name + "_weight"].double()
        if gemm_dtype == torch.int8:
            return int8_rows(a) @ int8_rows(weight).T + w[name + "_bias"].double()
        if gemm_dtype is not None:
            a, weight = a.to(gemm_dtype).double(), weight.to(gemm_dtype).double()
            return (a @ weight.T).to(gemm_dtype).double() + w[name + "_bias"].double()
        return a @ weight.T + w[name + "_bias"].double()

    qkv = linear(x, "qkv").view(t, 3, num_heads, d)
    out = torch.empty(t, num_heads, d, dtype=torch.float64)
    for b in range(len(cu_seqlens) - 1):
        lo, hi = int(cu_seqlens[b]), int(cu_seqlens[b + 1])
        if hi == lo:
            continue
        q, k, v = (qkv[lo:hi, i].transpose(0, 1) for i in range(3))  # [H, L, D]
        probs = torch.softmax(q @ k.transpose(1, 2) * scale, dim=-1)
        out[lo:hi] = (probs @ v).transpose(0, 1)
    norm = torch.nn.functional.layer_norm
    h = norm(linear(out.reshape(t, c), "out") + x, (c,), w["attn_norm_weight"].double(),
             w["attn_norm_bias"].double(), eps)
    up = linear(h, "up")
    act = _gelu_tanh(up) if gelu_tanh else torch.nn.functional.gelu(up)
    return norm(linear(act, "down") + h, (c,), w["ffn_norm_weight"].double(),
                w["ffn_norm_bias"].double(), eps)
