/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import org.bytedeco.javacpp.annotation.Cast;
import org.bytedeco.javacpp.annotation.Name;
import org.bytedeco.javacpp.annotation.Platform;

/**
 * The library-wide native methods of the bridge, from the C interface of {@code libdjl_attn.so}
 * ({@code native-ops/include/djl_attn/c_api.h}): registration, threads, supported values, the C
 * heap. The operator calls are declared beside the operator classes, package-private ({@code
 * io.djlattention.OperatorLibrary}), so that no entry taking raw handles is public.
 *
 * <p>JavaCPP generates the JNI library for this class at build time; {@link LibraryLoader} loads
 * it (and {@code libdjl_attn.so}, which it links) from the jar. Nothing here may be called before
 * {@link LibraryLoader#load()}.
 */
@Platform(include = "djl_attn/c_api.h", link = "djl_attn")
final class DjlAttnLibrary {

    /** Status of {@link #registrationStatus}: the operators are registered. */
    static final int OK = 0;

    /** Status: the arguments break a rule (the message says which). */
    static final int INVALID_ARGUMENT = 1;

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

    /**
     * The paged operators' rules on a batch's index values, on host arrays ({@code
     * djl_attn_check_paged_indices}: the native statement the operators run too).
     *
     * @return {@link #OK}, or {@link #INVALID_ARGUMENT} with the broken rule in {@link
     *     #lastErrorMessage} (another status: a native failure, the message says which)
     */
    @Name("djl_attn_check_paged_indices")
    static native int checkPagedIndices(
            String op,
            @Cast("const int32_t*") int[] blockTables,
            @Cast("const int32_t*") int[] contextLens,
            long numSeqs,
            long maxBlocks,
            @Cast("const int64_t*") long[] slotMapping,
            long numTokens,
            long blockSize,
            long numBlocks);

    @Name("djl_attn_last_error_message")
    static native String lastErrorMessage();
}
