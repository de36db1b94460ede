// The CPU kernels' parallel loops.
//
// DJL's libtorch brings its own OpenMP runtime; linking a second one into this library would
// double the thread pools. So the loops run on a small pool of plain threads of this library, or,
// with DJL_ATTN_CPU_THREADS=openmp, on libtorch's OpenMP threads, the ones MKL's GEMMs run on
// (GOMP_parallel, found in the loaded libtorch's dependencies with dlsym: nothing linked). Either
// way the thread count is libtorch's setting (MKL's thread count, which at::set_num_threads and
// DJL's JniUtils.setNumThreads set), read at every call, unless set_num_threads overrides it;
// without libtorch's OpenMP, OMP_NUM_THREADS, else the CPUs this process may run on. The calling
// thread always takes part, and small problems never leave it.
#pragma once

#include <cstdint>
#include <functional>

namespace djl_attn {

// Sets the number of threads (the caller included) used by later parallel_for calls; values
// below 1 restore the default (libtorch's setting, followed at every call). Safe to call at any
// time.
void set_num_threads(int num_threads);
int get_num_threads();

// Runs fn(begin, end) over disjoint ranges covering [0, n), in chunks of at least `grain`
// items, on the pool and the calling thread, and returns when all are done. Runs inline when
// there is one chunk or one thread. Concurrent calls from several threads are safe; so are
// nested calls. The first exception a chunk throws is rethrown on the calling thread.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace djl_attn
