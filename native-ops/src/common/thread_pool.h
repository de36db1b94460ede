// The CPU kernels' parallel loops.
//
// They run on libtorch's OpenMP threads, the ones MKL's GEMMs run on (GOMP_parallel, found in
// the loaded libtorch's dependencies with dlsym: nothing linked, so no second OpenMP runtime),
// with as many threads as libtorch's setting (MKL's thread count, which at::set_num_threads and
// DJL's JniUtils.setNumThreads set) unless set_num_threads overrides it. Where libtorch carries
// no OpenMP, or DJL_ATTN_CPU_THREADS=own, a small pool of plain threads of this library runs
// them, sized by set_num_threads, else OMP_NUM_THREADS, else the CPUs this process may run on.
// The calling thread always takes part, and small problems never leave it.
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
