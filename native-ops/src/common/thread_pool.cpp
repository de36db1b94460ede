#include "common/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/options.h"
#include "shim/torch_shim.h"

namespace djl_attn {
namespace {

Option kCpuThreads("DJL_ATTN_CPU_THREADS", {"own", "openmp"},
                   "where the CPU kernels' parallel loops run: the library's own pool, or "
                   "libtorch's OpenMP threads (the GEMMs' threads) when libtorch carries OpenMP");

// libtorch's OpenMP runtime (libgomp in the Linux builds of DJL and PyPI), reached through
// libtorch_cpu.so's dependencies like MKL: nothing linked. Its thread count is the one the kernels
// follow. Running the loops on its team (DJL_ATTN_CPU_THREADS=openmp) keeps one set of threads on
// the cores: next to our own pool a third thread competes for 2 cores, and under libgomp's default
// wait policy its worker spins after each GEMM while ours waits for a core (perf, MiniLM 8 x 128
// on 2 threads, 2026-11-27: 15% of the samples in libgomp's spin). It is not the default because
// each of its regions ends in a barrier that waits for every team thread: on an oversubscribed
// machine with the default (spinning) policy a one-sentence request took 256 ms against 5 ms on
// the own pool, whose caller runs every chunk a descheduled worker has not claimed
// (docs/design/fused-encoder-layer.md section 12).
struct OpenMp {
  void (*parallel)(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
  int (*max_threads)();  // MKL's thread count (global: at::set_num_threads sets it), else OpenMP's
  bool present() const { return parallel != nullptr && max_threads != nullptr; }
};

const OpenMp& openmp() {
  static const OpenMp api = [] {
    OpenMp out{};
    out.parallel = reinterpret_cast<decltype(out.parallel)>(
        shim::libtorch_cpu_symbol("GOMP_parallel"));
    out.max_threads = reinterpret_cast<int (*)()>(shim::libtorch_cpu_symbol("mkl_get_max_threads"));
    if (out.max_threads == nullptr) {
      out.max_threads = reinterpret_cast<int (*)()>(shim::libtorch_cpu_symbol("omp_get_max_threads"));
    }
    return out;
  }();
  return api;
}

bool use_openmp() { return kCpuThreads.is("openmp") && openmp().present(); }

int default_num_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// One parallel_for call: chunks are claimed with an atomic counter by the caller and by any
// worker that picks the job up.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n;
  int64_t chunk;
  int64_t num_chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;
  std::exception_ptr error;

  // Runs chunks until none is left unclaimed.
  void work() {
    for (int64_t c; (c = next.fetch_add(1)) < num_chunks;) {
      int64_t begin = c * chunk;
      int64_t end = std::min(n, begin + chunk);
      try {
        (*fn)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
      if (done.fetch_add(1) + 1 == num_chunks) {
        std::lock_guard<std::mutex> lock(mutex);
        finished.notify_all();
      }
    }
  }
};

class ThreadPool {
 public:
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void run(const std::shared_ptr<Job>& job, int workers_wanted) {
    ensure_workers(workers_wanted);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(job);
    }
    wake_.notify_all();
    job->work();
    std::unique_lock<std::mutex> lock(job->mutex);
    job->finished.wait(lock, [&] { return job->done.load() == job->num_chunks; });
  }

 private:
  void ensure_workers(int wanted) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (static_cast<int>(workers_.size()) < wanted) {
      workers_.emplace_back([this] { loop(); });
    }
  }

  void loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        job = queue_.front();
        // A job whose chunks are all claimed leaves the queue; its caller waits for the rest.
        if (job->next.load() >= job->num_chunks) {
          queue_.pop_front();
          continue;
        }
      }
      job->work();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
};

std::atomic<int> g_num_threads{0};

ThreadPool& pool() {
  // Leaked on purpose: workers must not be joined during static destruction at process exit,
  // when the JVM or Python may already have torn down parts of the runtime.
  static ThreadPool* instance = new ThreadPool();
  return *instance;
}

}  // namespace

void set_num_threads(int num_threads) { g_num_threads.store(num_threads > 0 ? num_threads : 0); }

int get_num_threads() {
  int n = g_num_threads.load();
  if (n > 0) return n;
  // Unset: libtorch's own setting (DJL's JniUtils.setNumThreads, torch.set_num_threads), read at
  // every call so that a later change is followed, as libtorch's own operators follow it.
  if (openmp().max_threads != nullptr) return std::max(1, openmp().max_threads());
  static const int fallback = default_num_threads();
  return fallback;
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int threads = get_num_threads();
  int64_t max_chunks = (n + grain - 1) / grain;
  if (threads <= 1 || max_chunks <= 1) {
    fn(0, n);
    return;
  }
  // A few chunks per thread balances uneven work (causal rows) without much claiming traffic.
  int64_t num_chunks = std::min<int64_t>(max_chunks, int64_t{threads} * 4);
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->chunk = (n + num_chunks - 1) / num_chunks;
  job->num_chunks = (n + job->chunk - 1) / job->chunk;
  if (use_openmp()) {
    // Every member of the team claims chunks; GOMP_parallel returns when the team is done. Inside
    // another parallel region (nested) the team is the caller alone, which runs every chunk.
    const auto team_threads = static_cast<unsigned>(std::min<int64_t>(threads, job->num_chunks));
    openmp().parallel([](void* data) { static_cast<Job*>(data)->work(); }, job.get(),
                      team_threads, 0);
  } else {
    pool().run(job, threads - 1);
  }
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace djl_attn
