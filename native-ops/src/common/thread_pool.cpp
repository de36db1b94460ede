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

namespace djl_attn {
namespace {

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
  pool().run(job, threads - 1);
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace djl_attn
