#include "cuda/flash/flash_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/alignment.h"

namespace djl_attn::flash {
namespace {

constexpr int kMaxSplits = kMaxKeySplits;
// A decode range is at least this many key tiles: shorter ones spend more on the prologue, the
// merge and the scratch round trip than they gain in parallelism.
constexpr int kDecodeMinTilesPerSplit = 2;
// CUDA's limit on gridDim.x.
constexpr int64_t kMaxGridX = 0x7fffffffLL;

bool any_bias(const FlashParams& p) {
  return p.q_bias != nullptr || p.k_bias != nullptr || p.v_bias != nullptr;
}


// Staging applies to float16/bfloat16 without q/k/v bias (the bias vectors would need the same
// padding) whose head dim, padded to a multiple of 8, is still one the kernels take.
bool staging_applies(const FlashParams& p) {
  return p.dtype != ElementType::kFloat32 && !any_bias(p) &&
         padded_head_dim((p.head_dim + 7) / 8 * 8) != 0;
}

// FlashAttention's num_splits_heuristic_fwd: the fewest splits whose wave efficiency (how full
// the last wave of blocks is) is within 95% of the best over 1..max_splits. Counts that give
// the same tiles per split as one fewer split are skipped: they add blocks, not balance.
int choose_tiled_splits(int64_t blocks, int sms, int blocks_per_sm, int n_blocks,
                        int max_splits) {
  const double slots = static_cast<double>(sms) * std::max(blocks_per_sm, 1);
  // A grid that already fills most of one wave gains nothing from splitting.
  if (blocks >= 0.8 * slots) return 1;
  max_splits = std::min({max_splits, n_blocks, kMaxSplits});
  if (max_splits <= 1) return 1;
  auto eligible = [&](int s) {
    return s == 1 || (n_blocks + s - 1) / s != (n_blocks + s - 2) / (s - 1);
  };
  std::vector<double> efficiency(max_splits + 1, 0.0);
  double best = 0.0;
  for (int s = 1; s <= max_splits; ++s) {
    if (!eligible(s)) continue;
    const double waves = static_cast<double>(blocks) * s / slots;
    efficiency[s] = waves / std::ceil(waves);
    best = std::max(best, efficiency[s]);
  }
  for (int s = 1; s <= max_splits; ++s) {
    if (eligible(s) && efficiency[s] >= 0.95 * best) return s;
  }
  return 1;
}

// The decode kernel's number of key ranges: the fewest whose waves are within 95% of the best
// wave efficiency over 1..max ranges, counting the ranges that whole tiles per range actually
// give. A memory-bound kernel wants every SM streaming until the end; each extra range costs a
// prologue, a scratch row and a share of the combine pass.
int choose_decode_splits(int64_t blocks, int64_t slots, int n_tiles) {
  // A grid that fills every slot at least once streams at bandwidth through a part-full last
  // wave: ranges would only add the combine pass (Llama-3.2-1B's step at batch 64, D = 64, 3
  // blocks per SM: 512 blocks took 3 ranges and ~11 us of combine per layer, H200).
  if (blocks >= slots) return 1;
  const int max_splits = std::min(kMaxSplits, std::max(1, n_tiles / kDecodeMinTilesPerSplit));
  auto actual = [&](int s) {
    const int per = std::max(1, (n_tiles + s - 1) / s);
    return std::max(1, (n_tiles + per - 1) / per);
  };
  auto efficiency = [&](int s) {
    const double waves = static_cast<double>(blocks) * s / static_cast<double>(slots);
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int s = 1; s <= max_splits; ++s) best = std::max(best, efficiency(actual(s)));
  for (int s = 1; s <= max_splits; ++s) {
    if (efficiency(actual(s)) >= 0.95 * best) return actual(s);
  }
  return 1;
}

// The float32 scratch of a split: partial outputs [splits, Hq, rows, D] and their logsumexps
// [splits, Hq, rows].
int64_t scratch_bytes(int splits, int64_t heads, int64_t rows, int64_t head_dim) {
  return splits > 1 ? static_cast<int64_t>(splits) * heads * rows * (head_dim + 1) * 4 : 0;
}

// The configuration that runs by default per padded head dim. Measured on an H200
// (docs/benchmarks.md, S = 2k and 8k, fp16/bf16, causal and not, in one run against SDPA's flash
// backend): at D = 128 the lazy-rescale, folded-scale, staged-output variant of the base tiles
// ran 1.057x the base tiles (geomean; 0.97-1.08x SDPA flash against 0.94-1.03x), at D = 64 the
// same variant on 128x128 tiles 1.040x (0.93-1.02x against 0.90-0.95x). Other head dims keep the
// base tiles.
int tuned_config(int padded) {
  if (padded == 64) return fwd::kTunedD64;
  if (padded == 128) return fwd::kTunedD128;
  return 0;
}

// Why the decode kernel cannot take a call of at most 16 rows, or null when it can.
const char* decode_refusal(const FlashParams& p, bool tensor_cores,
                           const cuda::DeviceFacts& device) {
  if (!tensor_cores) {
    return "float32, a head dim that is not a multiple of 8, unaligned rows or a GPU before sm_80";
  }
  if (any_bias(p)) return "q/k/v bias";
  if (p.cu_seqlens_q != nullptr) return "a varlen batch";
  if (!decode_runs_on(p.head_dim, device)) {
    return "a head dim other than 64, 128 or 256, or too little shared memory";
  }
  return nullptr;
}

#if defined(DJL_ATTN_HOPPER)  // the Hopper path's rules: a build without the kernel has no path
// Whether TMA can describe a [B, S, H, D] operand with these element strides (16-bit elements):
// positive, 16-byte multiples, below 2^40 bytes (cuTensorMapEncodeTiled's rules).
bool tma_strides(int64_t batch_stride, int64_t seq_stride, int64_t head_stride) {
  for (int64_t s : {seq_stride, head_stride, batch_stride}) {
    if (s <= 0 || s * 2 % 16 != 0 || s * 2 >= (int64_t{1} << 40)) return false;
  }
  return true;
}

// Consumer warpgroups of the Hopper kernel for `p` (hopper::consumers_compiled): 2 at D = 128
// and 256; at D = 64, 3 (192-row tiles, where 2 left the softmax latency exposed: docs/
// benchmarks.md, "The prefill gap at D = 64") except in causal calls of at most 1024 query rows.
// Measured on an H100 (fp16/bf16, 16k tokens, 32 heads of 64, 3 vs 2 consumers in one run), 3
// ran S 4k/16k non-causal +16..22%, causal +8..14%, S 1k non-causal +5..17%, but S 1k causal
// -6..-13% (fp16 262/240 vs 278/276 TFLOP/s, bf16 261/261 vs 276/275): 1024 rows are 5.33
// tiles of 192, and the ragged last tile beside the causal mask's short diagonal tiles leaves
// the persistent grid unbalanced.
int hopper_consumers(const FlashParams& p) {
  if (p.head_dim != 64) return 2;
  return p.causal && p.seqlen_q <= 1024 ? 2 : 3;
}

// The instantiation of a head dim and consumer count, or none where none is compiled.
std::optional<HopperTile> hopper_tile(int64_t head_dim, int consumers) {
  for (HopperTile t : {HopperTile::kD64C2, HopperTile::kD64C3, HopperTile::kD128C2,
                       HopperTile::kD256C2}) {
    if (head_dim_of(t) == head_dim && consumers_of(t) == consumers) return t;
  }
  return std::nullopt;
}
static_assert(hopper::consumers_compiled(64, 3) && hopper::consumers_compiled(64, 2) &&
                  hopper::consumers_compiled(128, 2) && hopper::consumers_compiled(256, 2) &&
                  !hopper::consumers_compiled(128, 3) && !hopper::consumers_compiled(256, 3),
              "HopperTile names the compiled instantiations");

// Whether the Hopper kernel takes `p` (folded already) on this device: float16/bfloat16,
// D = 64 or 128, batched, no bias, a positive scale, a logsumexp to write, 32-bit row and
// item counts, 16-byte aligned bases, 4-byte output pairs and 16-byte value rows (its
// zero-filling fallback), strides TMA can describe, compute capability 9.0 with its shared memory.
bool hopper_supports(const FlashParams& p, const cuda::DeviceFacts& device) {
  if (p.dtype != ElementType::kFloat16 && p.dtype != ElementType::kBFloat16) return false;
  if (!hopper::head_dim_compiled(p.head_dim)) return false;
  if (p.cu_seqlens_q != nullptr || any_bias(p)) return false;
  // The sliding window, soft-capping and ALiBi run in the sm_80 kernel's base tiles.
  if (has_flash_features(p)) return false;
  if (!(p.scale > 0.f) || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return false;
  if (p.lse == nullptr) return false;  // the kernel always writes it
  if (p.seqlen_q <= 0 || p.seqlen_k <= 0 || p.seqlen_q > kMaxGridX || p.seqlen_k > kMaxGridX) {
    return false;
  }
  if (p.heads_q > kMaxGridX || p.batch > kMaxGridX) return false;
  const int consumers = hopper_consumers(p);
  if (hopper::m_blocks(p.seqlen_q, consumers) * p.batch * p.heads_q > kMaxGridX) return false;
  for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.out)}) {
    if (!aligned16(ptr)) return false;
  }
  if (p.out_seq_stride % 2 != 0 || p.out_head_stride % 2 != 0 || p.out_batch_stride % 2 != 0 ||
      p.v_seq_stride % 8 != 0) {
    return false;
  }
  if (!tma_strides(p.q_batch_stride, p.q_seq_stride, p.q_head_stride) ||
      !tma_strides(p.k_batch_stride, p.k_seq_stride, p.k_head_stride) ||
      !tma_strides(p.v_batch_stride, p.v_seq_stride, p.v_head_stride)) {
    return false;
  }
  return device.cc_major == 9 && device.cc_minor == 0 &&
         device.smem_optin >= hopper::smem_bytes(p.head_dim, consumers);
}
#endif

// The plan of a call the tensor-core kernels can read in place (loads_16_bytes, sm_80+).
FlashPlan plan_tensor_core(const FlashParams& params, const FlashSwitches& sw,
                           const cuda::DeviceFacts& device, const Residency& residency) {
  FlashPlan plan;
  // Few query rows (decode, with the group folded): one m16 tile per block instead of a 64-row
  // tile, split over the keys to fill the GPU. It runs the sliding window (folded too: its rows
  // share the one query row's position), the soft-cap and ALiBi (folded too: each row reads its
  // own query head's slope).
  {
    const bool fold = folds_query_groups(params, /*decode_kernel=*/true);
    const FlashParams p = fold ? fold_query_groups(params) : params;
    const std::optional<DecodeKernel> kernel = decode_kernel(p, /*paged=*/false);
    if (sw.decode != DecodeMode::kOff && !any_bias(p) &&
        p.cu_seqlens_q == nullptr && p.seqlen_q >= 1 && p.seqlen_q <= decode::kMaxRows &&
        kernel && decode_runs_on(p.head_dim, device)) {
      plan.fold = fold;
      plan.path = FlashPath::kDecode;
      plan.decode = *kernel;
      plan.split = plan_decode_split(p.batch, p.heads_q, p.seqlen_q, decode_walked_keys(p, fold),
                                     p.head_dim, residency.decode(plan.decode), device.sm_count);
      return plan;
    }
  }

  plan.fold = folds_query_groups(params);
  const FlashParams p = plan.fold ? fold_query_groups(params) : params;
  const bool bias = any_bias(p);
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int padded = padded_head_dim(p.head_dim);
  // Calls with a sliding window, soft-capping or ALiBi take the tile kernel's base tiles.
  const bool features = has_flash_features(p);

  // The Hopper kernel does not split over the keys, so under "auto" a grid of block_m-row tiles
  // that leaves SMs idle stays on the sm_80 kernel, whose split-KV fills them; problems of at
  // most 64 query rows keep the sm_80 kernel's 64-row tiles. A tile configuration named in
  // DJL_ATTN_FLASH_CONFIG is an sm_80-kernel measurement: "auto" leaves it there.
#if defined(DJL_ATTN_HOPPER)
  if (sw.hopper_built && !bias && device.cc_major == 9 && sw.hopper != HopperMode::kOff &&
      !(sw.hopper == HopperMode::kAuto && sw.config != kAutoConfig) && p.seqlen_q > 64 &&
      !varlen) {
    const int consumers = hopper_consumers(p);
    const int64_t m_blocks = hopper::m_blocks(p.seqlen_q, consumers);
    const int64_t tiles = m_blocks * p.batch * p.heads_q;
    const bool fills = tiles >= 0.8 * device.sm_count;
    const std::optional<HopperTile> tile = hopper_tile(p.head_dim, consumers);
    if ((sw.hopper == HopperMode::kOn || fills) && tile && hopper_supports(p, device)) {
      plan.path = FlashPath::kHopper;
      plan.m_blocks = static_cast<int>(m_blocks);
      plan.hopper_items = static_cast<int>(plan.m_blocks * p.batch * p.heads_q);
      plan.hopper_grid = std::min(plan.hopper_items, device.sm_count);
      plan.hopper = HopperKernel{p.dtype, *tile, sw.hopper_ping_pong};
      return plan;
    }
  }
#endif

  // Varlen batches size their grid by the longest sequence, so that is what must fit.
  const bool small_m = p.seqlen_q <= 64;
  int cfg = sw.config == kAutoConfig ? tuned_config(padded) : sw.config;
  if (bias || small_m || features || !fwd::config_compiled(cfg, padded, sw.tuning_build) ||
      (cfg != 0 && fwd::tile_smem_bytes(padded, false, cfg) > device.smem_optin) ||
      (fwd::kFwdConfigs[cfg].fused_scale && !(p.scale > 0.f))) {
    cfg = 0;
  }
  // A configuration config_compiled accepts is one this build lists (fwd::TiledConfig).
  fwd::TiledConfig config = fwd::TiledConfig::kBase;
  if (!fwd::find_tiled_config(cfg, padded, &config)) cfg = 0;
  plan.path = FlashPath::kTiled;
  // The tuning configurations are instantiated for 128-row-class problems without bias only.
  // padded is one of the compiled head dims: tensor-core calls have padded_head_dim(D) != 0.
  plan.tiled = TiledKernel{tile_type(p.dtype), static_cast<TileHeadDim>(padded), cfg == 0 && bias,
                           cfg == 0 && small_m, config, features};
  plan.tile = fwd::tile_shape(padded, plan.tiled.small_m, cfg);
  plan.m_blocks = static_cast<int>((p.seqlen_q + plan.tile.block_m - 1) / plan.tile.block_m);
  int n_blocks = static_cast<int>((p.seqlen_k + plan.tile.block_n - 1) / plan.tile.block_n);
  if (p.window_left >= 0) {
    // A query tile sees at most its rows plus the window's keys (plus one tile of
    // misalignment): the splits share those tiles, not the whole sequence's.
    const int64_t right = p.causal ? 0 : std::max<int64_t>(p.window_right, 0);
    const int64_t keys = p.window_left + right + plan.tile.block_m;
    if (p.window_right >= 0 || p.causal) {
      n_blocks = std::min<int64_t>(n_blocks, (keys + plan.tile.block_n - 1) / plan.tile.block_n + 1);
    }
  }
  const int64_t blocks = static_cast<int64_t>(plan.m_blocks) * p.batch * p.heads_q;
  if (blocks > kMaxGridX) {
    // The binding's limit on B * Hq * ceil(Sq / 64) refuses such calls first.
    plan.refusal = std::to_string(blocks) + " query tiles exceed the CUDA grid";
    return plan;
  }
  // Varlen batches are not split: their rows have no fixed b * Sq + i slot in the scratch.
  KeySplit& split = plan.split;
  split.num_splits = varlen ? 1
                            : choose_tiled_splits(blocks, device.sm_count,
                                                  residency.tiled(plan.tiled), n_blocks,
                                                  kMaxSplits);
  split.n_blocks_per_split = std::max(1, (n_blocks + split.num_splits - 1) / split.num_splits);
  if (split.num_splits > 1) {
    split.accum_rows = p.batch * p.seqlen_q;
    split.scratch_bytes = scratch_bytes(split.num_splits, p.heads_q, split.accum_rows, p.head_dim);
  }
  return plan;
}

}  // namespace

bool decode_runs_on(int64_t head_dim, const cuda::DeviceFacts& device) {
  return decode::head_dim_compiled(head_dim) && device.cc_major >= 8 &&
         device.smem_optin >= decode::smem_bytes(head_dim);
}

bool folds_query_groups(const FlashParams& p, bool decode_kernel) {
  // The tile, fp32 and simple kernels would see the folded rows of a sliding window as different
  // positions and give them the key/value head's ALiBi slope: such calls run unfolded there.
  // The decode kernel reads them as one position and each row's own slope. Soft-capping folds
  // everywhere.
  return p.cu_seqlens_q == nullptr && p.seqlen_q == 1 && p.heads_q > p.heads_kv &&
         p.q_bias == nullptr && p.lse_head_stride == 0 &&
         (decode_kernel || (!has_window(p) && p.alibi_slopes == nullptr));
}

FlashParams fold_query_groups(const FlashParams& p) {
  const int64_t group = p.heads_q / p.heads_kv;
  FlashParams f = p;
  f.seqlen_q = group;
  f.heads_q = p.heads_kv;
  f.q_seq_stride = p.q_head_stride;
  f.q_head_stride = p.q_head_stride * group;
  f.out_seq_stride = p.out_head_stride;
  f.out_head_stride = p.out_head_stride * group;
  // The default [B, Hq, 1] logsumexp layout (folds_query_groups checks it): row gi of head hk is
  // element b * Hq + hk * g + gi.
  f.lse_batch_stride = p.heads_q;
  f.lse_head_stride = group;
  f.causal = false;
  return f;
}

FlashParams staged_layout(const FlashParams& p) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t padded = (p.head_dim + 7) / 8 * 8;
  const int64_t rows_q = varlen ? p.total_q : p.seqlen_q;
  const int64_t rows_k = varlen ? p.total_k : p.seqlen_k;
  FlashParams s = p;
  s.q = s.k = s.v = nullptr;
  s.out = nullptr;
  s.head_dim = padded;
  s.q_seq_stride = p.heads_q * padded, s.q_head_stride = padded;
  s.k_seq_stride = p.heads_kv * padded, s.k_head_stride = padded;
  s.v_seq_stride = p.heads_kv * padded, s.v_head_stride = padded;
  s.out_seq_stride = p.heads_q * padded, s.out_head_stride = padded;
  s.q_batch_stride = varlen ? 0 : rows_q * s.q_seq_stride;
  s.k_batch_stride = varlen ? 0 : rows_k * s.k_seq_stride;
  s.v_batch_stride = varlen ? 0 : rows_k * s.v_seq_stride;
  s.out_batch_stride = varlen ? 0 : rows_q * s.out_seq_stride;
  return s;
}

int64_t decode_walked_keys(const FlashParams& p, bool folded) {
  if (p.window_left < 0) return p.seqlen_k;
  // The first tile starts up to kBlockN - 1 keys before the earliest row's first visible key;
  // the latest row's last key is at most (positions - 1) + window_left keys after that one.
  const int64_t positions = folded ? 1 : p.seqlen_q;
  return std::min<int64_t>(p.seqlen_k, p.window_left + positions + decode::kBlockN - 1);
}

std::optional<DecodeKernel> decode_kernel(const FlashParams& p, bool paged) {
  if (p.dtype != ElementType::kFloat16 && p.dtype != ElementType::kBFloat16) return std::nullopt;
  if (!decode::head_dim_compiled(p.head_dim)) return std::nullopt;
  static_assert(decode::head_dim_compiled(64) && decode::head_dim_compiled(128) &&
                    decode::head_dim_compiled(256),
                "DecodeHeadDim names the compiled head dims");
  return DecodeKernel{
      p.dtype == ElementType::kFloat16 ? DecodeType::kFloat16 : DecodeType::kBFloat16,
      static_cast<DecodeHeadDim>(p.head_dim), paged, has_flash_features(p),
      p.alibi_slopes != nullptr};
}

KeySplit plan_decode_split(int64_t batch, int64_t heads, int64_t rows, int64_t walked_keys,
                           int64_t head_dim, int blocks_per_sm, int sm_count) {
  const int64_t blocks = batch * heads;  // within the grid limit: the precondition (flash_plan.h)
  const int n_tiles = static_cast<int>((walked_keys + decode::kBlockN - 1) / decode::kBlockN);
  const int64_t slots = static_cast<int64_t>(sm_count) * blocks_per_sm;
  KeySplit split;
  const int splits = choose_decode_splits(blocks, slots, n_tiles);
  split.n_blocks_per_split = std::max(1, (n_tiles + splits - 1) / splits);
  // Whole tiles per range may need fewer ranges than asked for.
  split.num_splits =
      std::max(1, (n_tiles + split.n_blocks_per_split - 1) / split.n_blocks_per_split);
  if (split.num_splits > 1) {
    split.accum_rows = batch * rows;
    split.scratch_bytes = scratch_bytes(split.num_splits, heads, split.accum_rows, head_dim);
  }
  return split;
}

bool loads_16_bytes(const FlashParams& p) {
  const int64_t size = element_size(p.dtype);
  if (p.head_dim * size % 16 != 0) return false;
  for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.out)}) {
    if (!aligned16(ptr)) return false;
  }
  for (int64_t stride : {p.q_batch_stride, p.q_seq_stride, p.q_head_stride, p.k_batch_stride,
                         p.k_seq_stride, p.k_head_stride, p.v_batch_stride, p.v_seq_stride,
                         p.v_head_stride, p.out_batch_stride, p.out_seq_stride,
                         p.out_head_stride}) {
    if (stride * size % 16 != 0) return false;
  }
  return true;
}

FlashPlan plan_flash(const FlashParams& p, const FlashSwitches& switches,
                     const cuda::DeviceFacts& device, const Residency& residency) {
  // No operator passes both (bias comes from bert_attention, the features from the flash
  // schemas), and the tensor-core kernels instantiate them apart: refuse rather than drop one.
  if (any_bias(p) && has_flash_features(p)) {
    FlashPlan refused;
    refused.refusal =
        "q/k/v bias together with a sliding window, soft-capping or ALiBi has no CUDA kernel";
    return refused;
  }
  // mma.sync with bfloat16 and cp.async need sm_80; every base tile shape fits in 96 KiB.
  const bool capable = p.dtype != ElementType::kFloat32 && device.cc_major >= 8 &&
                       device.smem_optin >= fwd::kTileKernelMinSmem;
  const bool tensor_cores = capable && padded_head_dim(p.head_dim) != 0 && loads_16_bytes(p);
  // Head dims that are not a multiple of 8 and unaligned views run on staged, padded copies
  // rather than on the simple kernel.
  const bool staged = !tensor_cores && capable && staging_applies(p);
  if (switches.decode == DecodeMode::kOn && !staged) {  // a staged call is checked on its copies
    // The rows the decode kernel would see: the GQA fold applies to single-row batches.
    const int64_t rows = folds_query_groups(p, /*decode_kernel=*/true) ? p.heads_q / p.heads_kv
                                                                       : p.seqlen_q;
    const char* refusal = rows <= decode::kMaxRows ? decode_refusal(p, tensor_cores, device)
                                                   : nullptr;
    if (refusal != nullptr) {
      FlashPlan plan;
      plan.refusal = std::string("DJL_ATTN_FLASH_DECODE=on: the decode kernel does not take ") +
                     refusal;
      return plan;
    }
  }
  if (staged) {
    FlashPlan plan = plan_flash(staged_layout(p), switches, device, residency);
    plan.staged = true;
    return plan;
  }
  if (p.dtype == ElementType::kFloat32) {
    FlashPlan plan;
    plan.fold = folds_query_groups(p);
    const auto tile = fp32::plan_flash_fp32(plan.fold ? fold_query_groups(p) : p, switches.fp32,
                                            switches.tuning_build, device);
    if (tile) {
      plan.path = FlashPath::kFp32;
      plan.fp32 = *tile;
      return plan;
    }
  }
  if (!tensor_cores) {
    // float32 the fp32 kernel does not take (DJL_ATTN_FLASH_FP32=simple, too little shared
    // memory), GPUs before sm_80 and bias at head dims staging cannot pad: one warp per query row.
    FlashPlan plan;
    plan.path = FlashPath::kSimple;
    plan.simple_row_blocks = (p.seqlen_q + 3) / 4;
    return plan;
  }
  return plan_tensor_core(p, switches, device, residency);
}

std::string describe(const FlashPlan& plan) {
  if (!plan.refusal.empty()) return "refused: " + plan.refusal;
  std::string out;
  if (plan.staged) out += "staged+";
  if (plan.fold) out += "fold+";
  switch (plan.path) {
    case FlashPath::kSimple:
      return out + "simple";
    case FlashPath::kFp32:
      return out + "fp32/" + fp32::describe(plan.fp32);
#if defined(DJL_ATTN_HOPPER)
    case FlashPath::kHopper:
      return out + "hopper/D" + std::to_string(head_dim_of(plan.hopper.tile)) + "/consumers" +
             std::to_string(consumers_of(plan.hopper.tile)) + "/grid" +
             std::to_string(plan.hopper_grid) +
             "/" + (plan.hopper.ping_pong ? "pingpong" : "free");
#endif
    case FlashPath::kDecode:
      return out + "decode/D" + std::to_string(static_cast<int>(plan.decode.head_dim)) +
             (plan.decode.alibi ? "/alibi" : (plan.decode.features ? "/features" : "")) +
             "/splits" +
             std::to_string(plan.split.num_splits);
    case FlashPath::kTiled: {
      const TiledKernel& t = plan.tiled;
      return out + "tiled/D" + std::to_string(static_cast<int>(t.head_dim)) + "/" +
             fwd::kFwdConfigs[fwd::config_index(t.config)].name +
             "/" + std::to_string(plan.tile.block_m) + "x" + std::to_string(plan.tile.block_n) +
             (t.bias ? "/bias" : "") + (t.features ? "/features" : "") + "/splits" +
             std::to_string(plan.split.num_splits);
    }
  }
  return out + "?";
}

}  // namespace djl_attn::flash
