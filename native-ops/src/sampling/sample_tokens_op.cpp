#include "sampling/sample_tokens_op.h"

#include <cmath>
#include <vector>

#include "common/binding.h"
#include "common/boxed.h"
#include "common/check.h"
#include "common/error.h"
#include "sampling/sampling_rules.h"

namespace djl_attn::sampling {
namespace {

constexpr const char* kOp = "sample_tokens";

// A per-row setting: [B], contiguous, on the logits' device.
void check_row_tensor(const Tensor& t, const char* arg, DType dtype, int64_t batch,
                      const Tensor& logits) {
  paged::check_index_tensor(kOp, t, arg, 1, "[B]", dtype, logits, "logits");
  check_size(t, {kOp, arg}, 0, "B", batch, "the rows of logits");
}

}  // namespace

void sample_tokens_boxed(shim::StableIValue* stack, const SamplingBackend& backend) {
  Tensor ids = take_tensor(stack, 0);
  Tensor logits = take_tensor(stack, 1);
  Tensor temperature = take_tensor(stack, 2);
  Tensor top_k = take_tensor(stack, 3);
  Tensor top_p = take_tensor(stack, 4);
  Tensor seeds = take_tensor(stack, 5);
  Tensor offsets = take_tensor(stack, 6);

  const ArgName ln{kOp, "logits"};
  check_dim(logits, ln, 2, "[B, V]");
  check_kernel_dtype(logits, ln);
  check_supported_device(logits, ln);
  check_contiguous(logits, ln);
  const int64_t batch = logits.size(0), vocab = logits.size(1);
  if (vocab < 1 || vocab > kMaxVocab) {
    fail_invalid(ln.prefix(), ": expected a vocabulary V in [1, ", kMaxVocab,
                 "] (the fixed-point weights' range), got ", vocab);
  }
  check_row_tensor(ids, "ids", DType::kInt64, batch, logits);
  check_row_tensor(temperature, "temperature", DType::kFloat32, batch, logits);
  check_row_tensor(top_k, "top_k", DType::kInt32, batch, logits);
  check_row_tensor(top_p, "top_p", DType::kFloat32, batch, logits);
  check_row_tensor(seeds, "seeds", DType::kInt64, batch, logits);
  check_row_tensor(offsets, "offsets", DType::kInt64, batch, logits);

  // The settings' values, read back in one copy: on the CPU always, on CUDA unless the stream is
  // being captured (a graph cannot wait for the host; the kernel's rules for unchecked values
  // then apply, sampling_rules.h) or the C interface has checked them already.
  const bool capturing =
      batch > 0 && backend.capturing != nullptr && backend.capturing(logits.data());
  if (!capturing && batch > 0) {
    std::vector<float> t = paged::host_buffer<float>(temperature);
    std::vector<int32_t> k = paged::host_buffer<int32_t>(top_k);
    std::vector<float> p = paged::host_buffer<float>(top_p);
    paged::copy_to_host(backend.copy_to_host, {paged::copy_into(t, temperature),
                                               paged::copy_into(k, top_k),
                                               paged::copy_into(p, top_p)});
    for (int64_t b = 0; b < batch; ++b) {
      if (!std::isfinite(t[b]) || t[b] < 0) {
        fail_invalid(kOp, ": temperature: expected finite values >= 0 (0: greedy), got ", t[b],
                     " at index ", b);
      }
      if (k[b] < 0) {
        fail_invalid(kOp, ": top_k: expected values >= 0 (0: every token), got ", k[b],
                     " at index ", b);
      }
      if (!(p[b] > 0 && p[b] <= 1)) {
        fail_invalid(kOp, ": top_p: expected values in (0, 1] (1: every token), got ", p[b],
                     " at index ", b);
      }
    }
  }
  if (batch == 0) return;

  SampleTokensParams params{};
  params.ids = ids.data_as<int64_t>();
  params.logits = logits.data();
  params.temperature = temperature.data_as<float>();
  params.top_k = top_k.data_as<int32_t>();
  params.top_p = top_p.data_as<float>();
  params.seeds = seeds.data_as<int64_t>();
  params.offsets = offsets.data_as<int64_t>();
  params.batch = batch;
  params.vocab = vocab;
  params.dtype = element_type(logits.dtype());
  backend.run(params);
}

}  // namespace djl_attn::sampling
