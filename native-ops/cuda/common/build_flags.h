// What this build of libdjl_attn_cuda.so compiled beyond the shipped kernels: CMake's
// DJL_ATTN_TUNING option adds the tuning variants that only a switch reaches (bench runs).
#pragma once

namespace djl_attn::cuda {

#if defined(DJL_ATTN_TUNING)
inline constexpr bool kTuningBuild = true;
#else
inline constexpr bool kTuningBuild = false;
#endif

}  // namespace djl_attn::cuda
