/*
 * The C interface of libdjl_attn.so for language bridges (the Java bridge in djl-extension).
 *
 * Operators are called through PyTorch's dispatcher, so a call reaches the CPU or the CUDA
 * implementation by the tensors' device, exactly as from Python or TorchScript. Tensor handles
 * are `at::Tensor*` values (DJL's PtNDArray handles, PyTorch's AtenTensorHandle): inputs are
 * borrowed, outputs are new handles the caller owns.
 */
#ifndef DJL_ATTN_C_API_H_
#define DJL_ATTN_C_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes returned by djl_attn_call and the registration query. */
#define DJL_ATTN_OK 0
#define DJL_ATTN_INVALID_ARGUMENT 1
#define DJL_ATTN_NATIVE_ERROR 2

/* Argument kinds, one per schema argument, in order. */
#define DJL_ATTN_ARG_TENSOR 0          /* value: a tensor handle (borrowed) */
#define DJL_ATTN_ARG_OPTIONAL_TENSOR 1 /* value: a tensor handle, or 0 for None */
#define DJL_ATTN_ARG_INT 2             /* value: the integer */
#define DJL_ATTN_ARG_FLOAT 3           /* value: the bits of a double */
#define DJL_ATTN_ARG_BOOL 4            /* value: 0 or 1 */

/*
 * DJL_ATTN_OK when the djl_attn operators are registered in this process (by this copy of the
 * library or by another one loaded earlier), otherwise DJL_ATTN_NATIVE_ERROR, with the reason
 * in djl_attn_registration_message().
 */
int32_t djl_attn_registration_status(void);
const char* djl_attn_registration_message(void);

/* Threads (the caller included) for CPU kernels; values below 1 restore the default. */
void djl_attn_set_num_threads(int32_t num_threads);
int32_t djl_attn_get_num_threads(void);

/*
 * Calls `djl_attn::<op_name>` through the dispatcher. `arg_kinds` and `num_outputs` must match
 * the operator's schema (a mismatch is a DJL_ATTN_NATIVE_ERROR and nothing runs). The kernel
 * reports an invalid argument to this call instead of throwing it through the dispatcher, so it
 * returns DJL_ATTN_INVALID_ARGUMENT without PyTorch logging anything. Writes `num_outputs` new tensor
 * handles to `outputs` on success. On failure returns DJL_ATTN_INVALID_ARGUMENT or
 * DJL_ATTN_NATIVE_ERROR and leaves the message in this thread's last error.
 */
int32_t djl_attn_call(const char* op_name, int32_t num_args, const int32_t* arg_kinds,
                      const int64_t* arg_values, int32_t num_outputs, int64_t* outputs);

/*
 * djl_attn_call for a bridge that holds its operator list checked against
 * djl_attn_operator_arg_kinds once (the Java bridge does at load): operator `index` of
 * [0, djl_attn_operator_count()), `arg_values` in the kinds and number of its schema, unchecked
 * per call. Returns the first `num_outputs` of the schema's outputs (fewer than it returns is
 * allowed: the others are freed here, e.g. flash_attention's logsumexp for a caller that does not
 * want it).
 */
int32_t djl_attn_call_operator(int32_t index, const int64_t* arg_values, int32_t num_outputs,
                               int64_t* outputs);

/*
 * The operators this library defines, for bridges that check their own list against it:
 * djl_attn_operator_schema(i) for i in [0, djl_attn_operator_count()) is the schema exactly as
 * registered ("flash_attention(Tensor q, ...) -> (Tensor, Tensor)"); "" for an index out of range.
 */
int32_t djl_attn_operator_count(void);
const char* djl_attn_operator_schema(int32_t index);
/* The name of operator `index` ("flash_attention"), "" out of range. */
const char* djl_attn_operator_name(int32_t index);
/* Its tensors returned; -1 out of range. */
int32_t djl_attn_operator_num_outputs(int32_t index);
/* Its number of arguments (-1 out of range); writes the DJL_ATTN_ARG_* kind of each, in order,
 * to `kinds` when `capacity` is at least that number. */
int32_t djl_attn_operator_arg_kinds(int32_t index, int32_t* kinds, int32_t capacity);

/*
 * A supported-values list of the kernels, the one list the operators check against, as
 * comma-separated values ("64,80,96,128,256"), or NULL for an unknown key. Keys:
 *   paged.head_dims, paged.block_sizes   the paged attention operators' D and block sizes
 *   flash.max_head_dim                    the largest D of flash_attention and bert_attention
 *   flash.tensor_core_head_dims           the D the CUDA tensor-core kernel is compiled for
 *                                         (other D <= flash.max_head_dim run padded up)
 *   linear.max_dim                        the largest E and M of causal_dot_product
 *   dtypes                                the floating dtypes every operator takes
 */
const char* djl_attn_supported_values(const char* key);

/*
 * The DJL_ATTN_* switches (docs/operators.md, "Switches"), read once from the environment when
 * the library declaring each is loaded. djl_attn_set_option changes one in-process (tests and
 * benchmarks): DJL_ATTN_OK, or DJL_ATTN_INVALID_ARGUMENT for an unknown name or a value not in its
 * list, with the reason in this thread's last error; "" restores the default.
 * djl_attn_get_option returns the current value (NULL for an unknown name);
 * djl_attn_option_errors the environment values ignored at load, one line each ("" when none).
 */
int32_t djl_attn_set_option(const char* name, const char* value);
const char* djl_attn_get_option(const char* name);
const char* djl_attn_option_errors(void);
/* The values a switch takes, comma-separated, the default first (NULL for an unknown name). */
const char* djl_attn_option_values(const char* name);

/*
 * Hands the memory that the C heap holds free back to the operating system (glibc's
 * malloc_trim(0), over every arena). libtorch's CPU tensors come from malloc, and glibc keeps what
 * they free for reuse: after a burst of large tensors the process stays near its peak resident
 * size until this is called (docs/serving.md, "Memory"). 1 if memory was returned, 0 if there was
 * none to return, -1 where the C library has no such call (not glibc).
 */
int32_t djl_attn_release_free_memory(void);

/*
 * The paged operators' rules on a batch's index values (native-ops/src/paged/paged_checks.h: the
 * one statement of them, which paged_attention, paged_prefill_attention, reshape_and_cache and
 * decoder_layer run on the values of their tensors), on a bridge's host arrays: a caller that
 * builds a step's batch once (the Java PagedBatch) checks it here, so that the step's per-layer
 * calls need not read the device back. `block_tables` [num_seqs, max_blocks] row-major,
 * `context_lens` [num_seqs], `slot_mapping` [num_tokens]; the cache has num_blocks blocks of
 * block_size slots. DJL_ATTN_OK when every rule holds; otherwise DJL_ATTN_INVALID_ARGUMENT with
 * the first broken rule in this thread's last error, a message that starts with `op` and names
 * the argument (context_lens, block_tables, slot_mapping) and the sequence or token.
 */
int32_t djl_attn_check_paged_indices(const char* op, const int32_t* block_tables,
                                     const int32_t* context_lens, int64_t num_seqs,
                                     int64_t max_blocks, const int64_t* slot_mapping,
                                     int64_t num_tokens, int64_t block_size, int64_t num_blocks);

/* This thread's last error message ("" when none). Valid until the thread's next call. */
const char* djl_attn_last_error_message(void);

/* Deletes a tensor handle returned by djl_attn_call that the caller will not wrap. */
void djl_attn_delete_tensor(int64_t handle);

#ifdef __cplusplus
}
#endif

#endif /* DJL_ATTN_C_API_H_ */
