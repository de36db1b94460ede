/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it;

import ai.djl.Device;
import ai.djl.engine.Engine;

/**
 * The one place that decides which device the parity tests run on: the GPU when DJL's PyTorch
 * engine sees one (DJL's default device), the CPU otherwise, with the same assertions on both.
 *
 * <p>The system property {@value #PROPERTY} overrides it: {@code cpu}, {@code gpu}, or a device
 * name DJL parses ({@code gpu(1)}). The Java GPU suite ({@code
 * integration-tests/scripts/gpu-java-suite.sh}) runs the tests once on the GPU this way.
 */
public final class TestDevice {

    /** System property naming the device; unset means DJL's default device. */
    public static final String PROPERTY = "djl.attn.test.device";

    private TestDevice() {}

    /**
     * Returns the device the tests create their arrays on.
     *
     * @return the device named by {@value #PROPERTY}, or the PyTorch engine's default device
     */
    public static Device get() {
        String name = System.getProperty(PROPERTY);
        Engine engine = Engine.getEngine("PyTorch");
        if (name == null || name.isBlank()) {
            return engine.defaultDevice();
        }
        Device device = Device.fromName(name.trim(), engine);
        // "gpu" parses to gpu(-1), which PyTorch reads as the current GPU but DJL compares
        // unequal to gpu(0), the device of the arrays it creates (ParameterStore fails on that).
        return device.isGpu() && device.getDeviceId() < 0 ? Device.gpu() : device;
    }

    /**
     * Returns whether the tests run on a GPU.
     *
     * @return {@code true} when {@link #get()} is a GPU
     */
    public static boolean isGpu() {
        return get().isGpu();
    }
}
