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
 * Calls `djl_attn::<op_name>` through the dispatcher. Writes `num_outputs` new tensor handles to
 * `outputs` on success. On failure returns DJL_ATTN_INVALID_ARGUMENT or DJL_ATTN_NATIVE_ERROR
 * and leaves the message in this thread's last error.
 */
int32_t djl_attn_call(const char* op_name, int32_t num_args, const int32_t* arg_kinds,
                      const int64_t* arg_values, int32_t num_outputs, int64_t* outputs);

/* This thread's last error message ("" when none). Valid until the thread's next call. */
const char* djl_attn_last_error_message(void);

/* Deletes a tensor handle returned by djl_attn_call that the caller will not wrap. */
void djl_attn_delete_tensor(int64_t handle);

#ifdef __cplusplus
}
#endif

#endif /* DJL_ATTN_C_API_H_ */
