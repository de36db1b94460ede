/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import org.bytedeco.javacpp.annotation.Cast;
import org.bytedeco.javacpp.annotation.Name;
import org.bytedeco.javacpp.annotation.Platform;

/**
 * The native methods that call operators: the operator part of the C interface of {@code
 * libdjl_attn.so} ({@code native-ops/include/djl_attn/c_api.h}), primitives and {@code long}
 * tensor handles only. Package-private beside the operator classes that use it ({@link
 * OperatorCall}), so that no raw-handle entry is public; the loading and library-wide natives stay
 * in {@code io.djlattention.jni}.
 *
 * <p>JavaCPP generates its JNI library ({@code libjniOperatorLibrary.so}) at build time;
 * {@link OperatorCall} loads it after {@code LibraryLoader} loaded {@code libdjl_attn.so}, which it
 * links.
 */
@Platform(include = "djl_attn/c_api.h", link = "djl_attn")
final class OperatorLibrary {

    /** Status: success. */
    static final int OK = 0;
    /** Status: the operator rejected its arguments. */
    static final int INVALID_ARGUMENT = 1;
    /** Status: any other native failure. */
    static final int NATIVE_ERROR = 2;

    /** Argument kind: a tensor handle. */
    static final int ARG_TENSOR = 0;
    /** Argument kind: a tensor handle, or 0 for None. */
    static final int ARG_OPTIONAL_TENSOR = 1;
    /** Argument kind: an integer. */
    static final int ARG_INT = 2;
    /** Argument kind: the bits of a double. */
    static final int ARG_FLOAT = 3;
    /** Argument kind: 0 or 1. */
    static final int ARG_BOOL = 4;

    private OperatorLibrary() {}

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

    @Name("djl_attn_last_error_message")
    static native String lastErrorMessage();
}
