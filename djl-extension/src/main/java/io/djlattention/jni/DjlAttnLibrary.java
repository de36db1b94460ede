/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import org.bytedeco.javacpp.annotation.Cast;
import org.bytedeco.javacpp.annotation.Name;
import org.bytedeco.javacpp.annotation.Platform;

/**
 * The native methods of the bridge: the C interface of {@code libdjl_attn.so}
 * ({@code native-ops/include/djl_attn/c_api.h}), one method per C function, primitives and
 * {@code long} tensor handles only.
 *
 * <p>JavaCPP generates the JNI library for this class at build time; {@link LibraryLoader} loads
 * it (and {@code libdjl_attn.so}, which it links) from the jar. Nothing here may be called before
 * {@link LibraryLoader#load()}.
 */
@Platform(include = "djl_attn/c_api.h", link = "djl_attn")
final class DjlAttnLibrary {

    /** Status of {@link #call}: success. */
    public static final int OK = 0;
    /** Status of {@link #call}: the operator rejected its arguments. */
    public static final int INVALID_ARGUMENT = 1;
    /** Status of {@link #call}: any other native failure. */
    public static final int NATIVE_ERROR = 2;

    /** Argument kind: a tensor handle. */
    public static final int ARG_TENSOR = 0;
    /** Argument kind: a tensor handle, or 0 for None. */
    public static final int ARG_OPTIONAL_TENSOR = 1;
    /** Argument kind: an integer. */
    public static final int ARG_INT = 2;
    /** Argument kind: the bits of a double. */
    public static final int ARG_FLOAT = 3;
    /** Argument kind: 0 or 1. */
    public static final int ARG_BOOL = 4;

    private DjlAttnLibrary() {}

    @Name("djl_attn_registration_status")
    static native int registrationStatus();

    @Name("djl_attn_registration_message")
    static native String registrationMessage();

    @Name("djl_attn_set_num_threads")
    static native void setNumThreads(int numThreads);

    @Name("djl_attn_get_num_threads")
    static native int getNumThreads();

    /**
     * Calls {@code djl_attn::<opName>} through PyTorch's dispatcher.
     *
     * @return {@link #OK}, {@link #INVALID_ARGUMENT} or {@link #NATIVE_ERROR}
     */
    @Name("djl_attn_call")
    static native int call(
            String opName,
            int numArgs,
            @Cast("const int32_t*") int[] argKinds,
            @Cast("const int64_t*") long[] argValues,
            int numOutputs,
            @Cast("int64_t*") long[] outputs);

    /**
     * Calls operator {@code index} ({@code djl_attn_operator_*} numbering) with its schema's
     * arguments, unchecked per call: {@link Operator} was checked against the schemas at load and
     * {@link OperatorCall} checks each argument's kind as it is added. Returns the first {@code
     * numOutputs} outputs; the others are freed natively.
     *
     * @return {@link #OK}, {@link #INVALID_ARGUMENT} or {@link #NATIVE_ERROR}
     */
    @Name("djl_attn_call_operator")
    static native int callOperator(
            int index,
            @Cast("const int64_t*") long[] argValues,
            int numOutputs,
            @Cast("int64_t*") long[] outputs);

    @Name("djl_attn_operator_count")
    static native int operatorCount();

    @Name("djl_attn_operator_schema")
    static native String operatorSchema(int index);

    @Name("djl_attn_operator_name")
    static native String operatorName(int index);

    @Name("djl_attn_operator_num_outputs")
    static native int operatorNumOutputs(int index);

    /**
     * Writes the argument kinds of operator {@code index} to {@code kinds} when it can hold them.
     *
     * @return the number of arguments, or -1 for an index out of range
     */
    @Name("djl_attn_operator_arg_kinds")
    static native int operatorArgKinds(int index, @Cast("int32_t*") int[] kinds, int capacity);

    /**
     * A supported-values list of the kernels, comma-separated.
     *
     * @return the list, or null for an unknown key
     */
    @Name("djl_attn_supported_values")
    static native String supportedValues(String key);

    /**
     * Hands the C heap's free memory back to the operating system (glibc's {@code malloc_trim}).
     *
     * @return 1 if memory was returned, 0 if there was none, -1 where the C library cannot
     */
    @Name("djl_attn_release_free_memory")
    static native int releaseFreeMemory();

    @Name("djl_attn_last_error_message")
    static native String lastErrorMessage();

    @Name("djl_attn_delete_tensor")
    static native void deleteTensor(long handle);
}
