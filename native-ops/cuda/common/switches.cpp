// The shipped switches of libdjl_attn_cuda.so, declared in this one file and read as one typed
// config (switches.h). Each is an Option (common/options.h): read from the environment once at
// load, switched in-process through djl_attn_set_option.
#include "cuda/common/switches.h"

#include <string>
#include <vector>

#include "common/options.h"
#include "cuda/common/build_flags.h"
#include "cuda/flash/flash_fp32.h"
#include "cuda/flash/flash_shapes.h"

namespace djl_attn::cuda {
namespace {

using flash::DecodeMode;
using flash::FlashSwitches;
using flash::HopperMode;
using flash::kAutoConfig;
namespace fwd = flash::fwd;
namespace fp32 = flash::fp32;
using paged::DecodeOptions;
using paged::DecodeRequest;
using paged::StreamConfig;
using paged::decode_request_named;
using paged::stream_config_named;
using linear::LinearVariant;
using linear::parse_linear_variant;

// ---- flash_attention (cuda/flash/flash_launch.cu) ----------------------------------------------

// DJL_ATTN_FLASH_CONFIG: a kFwdConfigs tile configuration (flash_shapes.h) by name, for tuning
// runs; unset ("auto"): the measured best per head dim. The values are the configurations this
// build compiled (all of kFwdConfigs in a DJL_ATTN_TUNING build; the base tiles and the two
// measured defaults otherwise), so that a typo or a configuration this build lacks is reported
// once, at load, instead of passing for a measurement. kConfigChoices.configs[i] is the
// kFwdConfigs index of value i (kAutoConfig for "auto").
struct ConfigChoices {
  std::vector<std::string> names{"auto"};
  std::vector<int> configs{kAutoConfig};
  ConfigChoices() {
    for (int c = 0; c < fwd::kNumFwdConfigs; ++c) {
      if (fwd::config_compiled(c, 64, kTuningBuild) || fwd::config_compiled(c, 128, kTuningBuild)) {
        names.push_back(fwd::kFwdConfigs[c].name);
        configs.push_back(c);
      }
    }
  }
};
const ConfigChoices kConfigChoices;

Option kFlashConfig("DJL_ATTN_FLASH_CONFIG", kConfigChoices.names,
                    "a tile configuration of the sm_80 flash kernel (tuning runs)");
// The values of these two switches in the order of the modes (flash_plan.h).
Option kFlashDecode("DJL_ATTN_FLASH_DECODE", {"auto", "on", "off"},
                    "the flash decode kernel: auto, forced (tests), or off (comparisons)");
constexpr DecodeMode kDecodeModes[] = {DecodeMode::kAuto, DecodeMode::kOn, DecodeMode::kOff};
Option kFlashHopper("DJL_ATTN_FLASH_HOPPER", {"auto", "on", "off"},
                    "the Hopper flash kernel: auto, forced (tests), or off (comparisons)");
constexpr HopperMode kHopperModes[] = {HopperMode::kAuto, HopperMode::kOn, HopperMode::kOff};
// DJL_ATTN_FLASH_FP32: the float32 path (flash_fp32.h, Fp32Mode): auto is float32-accurate;
// tf32, the opt-in to tf32 precision, is a value only where its kernels are compiled (a
// DJL_ATTN_TUNING build, fp32_tile_compiled): in the shipped build the environment's "tf32" is
// reported once at load and auto runs, and djl_attn_set_option refuses it, instead of something
// else running under its name. kFp32Choices.modes[i] is value i's mode.
struct Fp32Choices {
  std::vector<std::string> names;
  std::vector<fp32::Fp32Mode> modes;
  Fp32Choices() {
    int index = 0;
    for (const char* name : fp32::kFp32ModeNames) {
      const auto mode = static_cast<fp32::Fp32Mode>(index++);
      // tf32 where its 1xTF32 tiles are compiled (any head dim: they come and go together).
      if (mode == fp32::Fp32Mode::kTf32 &&
          !fp32::fp32_tile_compiled(32, 4, /*split_tf32=*/false, kTuningBuild)) {
        continue;
      }
      names.push_back(name);
      modes.push_back(mode);
    }
  }
};
const Fp32Choices kFp32Choices;

Option kFlashFp32("DJL_ATTN_FLASH_FP32", kFp32Choices.names,
                  "float32 flash: auto (3xTF32, float32 accuracy), simple, 4w/8w tiles; tf32 "
                  "(opt-in, ~1e-3) in tuning builds");
#if defined(DJL_ATTN_HOPPER)
// "pingpong" or "free" picks the Hopper consumers' GEMM scheduling for a measurement
// (bench/hopper_check.sh, SCHEDS="pingpong free"); the default, ping-pong, measured 1.00-1.19x
// free at D = 128 and equal at D = 64.
Option kHopperSched("DJL_ATTN_FLASH_HOPPER_SCHED", {"pingpong", "free"},
                    "the Hopper kernel's GEMM scheduling (measurements)");
#endif

// The switches' current values (djl_attn_set_option switches them in-process; each is an index
// into its values, read without parsing) and what this build compiled: the plan's inputs.
FlashSwitches flash_switches() {
  FlashSwitches s;
  s.decode = kDecodeModes[kFlashDecode.index()];
  s.hopper = kHopperModes[kFlashHopper.index()];
  s.config = kConfigChoices.configs[kFlashConfig.index()];
#if defined(DJL_ATTN_HOPPER)
  s.hopper_ping_pong = kHopperSched.index() == 0;
  s.hopper_built = true;
#endif
  s.tuning_build = kTuningBuild;
  s.fp32 = kFp32Choices.modes[kFlashFp32.index()];
  return s;
}

// ---- paged_attention (cuda/paged/paged_attention.cu) -------------------------------------------

// The switches of the paged decode launcher, read once at load (common/options.h) and switched
// in-process through djl_attn_set_option by tests and benchmarks.
//
// DJL_ATTN_PAGED_KERNEL forces a kernel: v1 (one pass per sequence), v2 (partitioned context plus
// a reduce), flash (the tensor-core split-KV decode kernel; on an fp8 cache the fp8 tensor-core
// kernel, paged_fp8_mma.cuh); auto lets the plan choose. A forced flash that cannot run a call
// (float32, ALiBi, another head dim...) runs auto's choice of v1/v2.
Option kPagedKernel("DJL_ATTN_PAGED_KERNEL", {"auto", "v1", "v2", "flash"},
                    "forces a paged_attention CUDA kernel (tests, benchmarks)");

// DJL_ATTN_PAGED_CONFIG: how v1/v2 stream K/V (a tuning switch for benchmarks). The other
// configurations exist for float16/bfloat16 caches with head dims 64 and 128; other shapes run
// the default whatever is asked. Unset: smem4 (each warp streams cache blocks through a cp.async
// ring in shared memory), measured on an H200 at 2.63-2.93 TB/s against 2.48-2.78 for "default",
// the register streaming kernel, at batch 32/128 and context 4k/16k (docs/benchmarks.md).
// The tuning variants beyond smem4 and the register default are compiled in DJL_ATTN_TUNING
// builds only (paged_attention_launch.cuh).
std::vector<std::string> paged_config_choices() {
#if defined(DJL_ATTN_TUNING)
  return {"smem4", "default", "w8l2", "smem8", "pf", "w8l2pf"};
#else
  return {"smem4", "default"};
#endif
}

Option kPagedConfig("DJL_ATTN_PAGED_CONFIG", paged_config_choices(),
                    "how the paged decode kernel streams K/V (benchmarks)");

// DJL_ATTN_PAGED_PARTITION: v2's partition length in tokens before the plan halves it for small
// grids (default kPartitionSize = 512); a tuning switch.
Option kPagedPartition("DJL_ATTN_PAGED_PARTITION",
                       {"512", "64", "128", "256", "1024", "2048", "4096", "8192"},
                       "v2's partition length in tokens (benchmarks)");

// The switches' current values. Each Option holds one of the names of its list, which the plan's
// lookups all know.
DecodeOptions paged_switches() {
  DecodeOptions options;
  options.kernel = decode_request_named(kPagedKernel.value()).value_or(DecodeRequest::kAuto);
  options.config = stream_config_named(kPagedConfig.value()).value_or(StreamConfig::kSmem4);
  options.partition_size = std::stoll(kPagedPartition.value());
  return options;
}

// ---- causal_dot_product (cuda/linear/causal_dot_product_launch.cu) -----------------------------

// DJL_ATTN_LINEAR_KERNEL forces a variant (tests, benchmarks); read once at load
// (common/options.h), switched in-process through djl_attn_set_option.
Option kLinearKernel("DJL_ATTN_LINEAR_KERNEL", {"auto", "per_thread", "low_occupancy", "chunked"},
                     "forces a causal_dot_product CUDA kernel (tests, benchmarks)");

LinearVariant linear_switch() {
  return parse_linear_variant(kLinearKernel.value().c_str(), "DJL_ATTN_LINEAR_KERNEL");
}

// ---- the decoder's GEMMs (cuda/gemm/gemm_cuda.cpp) ---------------------------------------------

// DJL_ATTN_GEMM_KERNEL=cublaslt runs every GEMM the skinny kernel would take on cuBLASLt instead
// (and the fused epilogues' unfused kernels): the before/after of one build, for benchmarks.
Option kGemmKernel("DJL_ATTN_GEMM_KERNEL", {"auto", "cublaslt"},
                   "the decoder's GEMMs: auto (skinny kernel for <= 8 rows) or cublaslt (comparisons)");
constexpr GemmRequest kGemmRequests[] = {GemmRequest::kAuto, GemmRequest::kCublasLt};

}  // namespace

CudaSwitches cuda_switches() {
  return CudaSwitches{flash_switches(), paged_switches(), linear_switch(),
                      kGemmRequests[kGemmKernel.index()]};
}

}  // namespace djl_attn::cuda
