/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

/**
 * The process's C heap, where libtorch's CPU tensors live.
 *
 * <p>libtorch allocates CPU tensors with {@code malloc}, and glibc keeps what they free for
 * reuse: each time it frees a block it had mapped, glibc raises its mmap threshold to that block's
 * size (up to 32 MiB), so later activations come from its arenas and stay resident when freed. After a
 * burst of large batches the process therefore stays near its peak resident size although the
 * tensors are gone. {@link #releaseFree} hands that memory back; a server calls it when a burst
 * ends (the serving module's embedding service does when its queue empties), not after every
 * call, so that a sustained load keeps reusing the arenas instead of faulting fresh pages in.
 */
public final class NativeHeap {

    private NativeHeap() {}

    /**
     * Returns the C heap's free memory to the operating system ({@code malloc_trim(0)} over every
     * arena). Cheap when there is nothing to return; safe while other threads allocate (each
     * arena is locked in turn).
     *
     * @return true if memory was returned; false if there was none, or where the C library is
     *     not glibc (nothing to do there)
     * @throws ai.djl.engine.EngineException if the native library cannot be loaded
     */
    public static boolean releaseFree() {
        LibraryLoader.load();
        return DjlAttnLibrary.releaseFreeMemory() == 1;
    }
}
