/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.types.DataType;
import ai.djl.pytorch.jni.JniUtils;

import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

import java.util.Locale;

/** The options every command shares: device, data type and threads. */
final class RuntimeOptions {

    @Spec(Spec.Target.MIXEE)
    CommandSpec spec;

    @Option(
            names = "--device",
            paramLabel = "DEVICE",
            description =
                    "cpu, gpu or gpu:N (default: the GPU when DJL sees one, else the CPU)")
    String device;

    @Option(
            names = "--dtype",
            paramLabel = "TYPE",
            defaultValue = "float32",
            description = "float32 or float16 (weights, activations, KV cache; default ${DEFAULT-VALUE})")
    String dtype;

    @Option(
            names = "--threads",
            paramLabel = "N",
            description =
                    "intra-op threads of PyTorch and of ONNX Runtime (default: PyTorch's own choice,"
                            + " the number of cores)")
    Integer threads;

    /**
     * Returns the device the user named, or {@code null} for DJL's default.
     *
     * @return the device or null
     */
    Device device() {
        if (device == null) {
            return null;
        }
        String d = device.trim().toLowerCase(Locale.ROOT);
        if (d.equals("cpu")) {
            return Device.cpu();
        }
        if (d.equals("gpu") || d.equals("cuda")) {
            return Device.gpu();
        }
        if (d.startsWith("gpu:") || d.startsWith("cuda:")) {
            try {
                return Device.gpu(Integer.parseInt(d.substring(d.indexOf(':') + 1)));
            } catch (NumberFormatException e) {
                // falls through to the error below
            }
        }
        throw new ParameterException(
                spec.commandLine(), "--device: expected cpu, gpu or gpu:N, got '" + device + "'");
    }

    /**
     * Returns the data type.
     *
     * @return float32 or float16
     */
    DataType dataType() {
        switch (dtype.trim().toLowerCase(Locale.ROOT)) {
            case "float32":
            case "fp32":
                return DataType.FLOAT32;
            case "float16":
            case "fp16":
                return DataType.FLOAT16;
            default:
                throw new ParameterException(
                        spec.commandLine(),
                        "--dtype: expected float32 or float16, got '" + dtype + "'");
        }
    }

    /**
     * Checks the options and applies the thread count to PyTorch (before and after its engine
     * starts: the property reaches a fresh engine, the JNI call a running one).
     */
    void apply() {
        device();
        dataType();
        if (threads != null) {
            if (threads < 1) {
                throw new ParameterException(
                        spec.commandLine(), "--threads: expected >= 1, got " + threads);
            }
            System.setProperty("ai.djl.pytorch.num_threads", String.valueOf(threads));
            Engine.getEngine("PyTorch");
            JniUtils.setNumThreads(threads);
        }
    }

    /**
     * Returns the device DJL will run on, for the reports.
     *
     * @return the device
     */
    Device resolvedDevice() {
        Device d = device();
        return d != null ? d : Engine.getEngine("PyTorch").defaultDevice();
    }
}
