/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import ai.djl.engine.Engine;
import ai.djl.engine.EngineException;
import ai.djl.pytorch.jni.JniUtils;
import java.io.File;
import java.io.IOException;
import java.net.URL;
import org.bytedeco.javacpp.Loader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads the operator libraries into the process, once.
 *
 * <p>Order matters: the PyTorch engine is initialised first, because {@code libdjl_attn.so}
 * resolves PyTorch's stable C functions from the libtorch that DJL loaded and registers its
 * operators with it when it is loaded. JavaCPP then extracts the libraries from the jar (to its
 * cache) and loads them; the CUDA library only when the engine sees a GPU. A second call does
 * nothing, and a second copy of the library in the process registers nothing.
 */
public final class LibraryLoader {

    private static final Logger logger = LoggerFactory.getLogger(LibraryLoader.class);
    private static final String CUDA_LIBRARY = "libdjl_attn_cuda.so";

    private static volatile boolean loaded;

    private LibraryLoader() {}

    /**
     * Loads the libraries if this process has not loaded them yet.
     *
     * @throws EngineException if the PyTorch engine or the libraries cannot be loaded
     */
    public static void load() {
        if (loaded) {
            return;
        }
        synchronized (LibraryLoader.class) {
            if (loaded) {
                return;
            }
            Engine engine = Engine.getEngine("PyTorch");
            try {
                Loader.load(DjlAttnLibrary.class);
            } catch (UnsatisfiedLinkError e) {
                throw new EngineException("Failed to load libdjl_attn.so: " + e.getMessage(), e);
            }
            if (DjlAttnLibrary.registrationStatus() != DjlAttnLibrary.OK) {
                throw new EngineException(
                        "djl_attn operators are not registered: "
                                + DjlAttnLibrary.registrationMessage());
            }
            // Same pool size as libtorch's intra-op pool, which DJL configures.
            DjlAttnLibrary.setNumThreads(JniUtils.getNumThreads());
            if (engine.getGpuCount() > 0) {
                loadCudaLibrary();
            }
            loaded = true;
        }
    }

    /** Returns whether the CUDA operators were loaded. */
    public static boolean isCudaLoaded() {
        return cudaLoaded;
    }

    private static volatile boolean cudaLoaded;

    private static void loadCudaLibrary() {
        String resource = Loader.getPlatform() + '/' + CUDA_LIBRARY;
        URL url = DjlAttnLibrary.class.getResource(resource);
        if (url == null) {
            logger.warn(
                    "A GPU is present but this build of djl-attention has no {}; GPU arrays will"
                            + " fail with a dispatcher error. Build with nvcc on the PATH.",
                    CUDA_LIBRARY);
            return;
        }
        try {
            File file = Loader.cacheResource(url);
            System.load(file.getAbsolutePath());
            cudaLoaded = true;
        } catch (IOException | UnsatisfiedLinkError e) {
            throw new EngineException("Failed to load " + CUDA_LIBRARY + ": " + e.getMessage(), e);
        }
    }
}
