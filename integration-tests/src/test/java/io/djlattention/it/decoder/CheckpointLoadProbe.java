/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.decoder;

import ai.djl.Device;
import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.util.cuda.CudaUtils;

import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.HfDecoderLoader;
import io.djlattention.zoo.hf.HfCheckpoint;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * Loads one Hugging Face decoder checkpoint in a JVM of its own and prints what the load cost:
 * the resident size before, its peak during the load (VmHWM, reset to the current size just before
 * through {@code /proc/self/clear_refs} when the kernel allows), the parameters' bytes, the time,
 * the GPU memory in use before and after (a GPU device), then every parameter's SHA-256 (its
 * values' bytes, little-endian). {@link CheckpointLoadMemoryTest} runs it; it is also the
 * benchmark of docs/benchmarks.md ("Checkpoint loading").
 *
 * <pre>java -cp ... io.djlattention.it.decoder.CheckpointLoadProbe DIR float32|float16 cpu|gpu0
 * </pre>
 */
public final class CheckpointLoadProbe {

    private CheckpointLoadProbe() {}

    /**
     * Runs the probe.
     *
     * @param args the checkpoint directory, the data type, the device name
     * @throws Exception if the load fails
     */
    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        DataType type = "float16".equals(args[1]) ? DataType.FLOAT16 : DataType.FLOAT32;
        Engine engine = Engine.getEngine("PyTorch");
        Device device = Device.fromName(args[2], engine);
        device = device.isGpu() && device.getDeviceId() < 0 ? Device.gpu() : device;
        try (NDManager manager = NDManager.newBaseManager(device, "PyTorch")) {
            // libtorch (and on a GPU the CUDA context) is loaded before the baseline.
            manager.ones(new Shape(4)).add(1).toFloatArray();
            HfCheckpoint checkpoint = HfCheckpoint.open(dir);
            long gpuBefore = device.isGpu() ? CudaUtils.getGpuMemory(device).getUsed() : -1;
            long rssBefore = status("VmRSS");
            long anonBefore = status("RssAnon");
            long fileBefore = status("RssFile");
            boolean reset = resetPeak();
            long start = System.nanoTime();
            Decoder decoder = HfDecoderLoader.load(checkpoint, manager, type);
            long nanos = System.nanoTime() - start;
            long hwm = status("VmHWM");
            long gpuAfter = device.isGpu() ? CudaUtils.getGpuMemory(device).getUsed() : -1;
            long bytes = 0;
            for (String name : Decoder.parameterShapes(decoder.getConfig()).keySet()) {
                NDArray w = decoder.weight(name);
                bytes += w.size() * w.getDataType().getNumOfBytes();
            }
            System.out.println("rssBeforeKiB " + rssBefore);
            System.out.println("peakKiB " + hwm);
            System.out.println("peakReset " + reset);
            System.out.println("rssAnonGrowthKiB " + (status("RssAnon") - anonBefore));
            System.out.println("rssFileGrowthKiB " + (status("RssFile") - fileBefore));
            System.out.println("weightBytes " + bytes);
            System.out.println("loadMs " + nanos / 1_000_000);
            System.out.println("gpuUsedBefore " + gpuBefore);
            System.out.println("gpuUsedAfter " + gpuAfter);
            for (String name : Decoder.parameterShapes(decoder.getConfig()).keySet()) {
                System.out.println("sha256 " + name + " " + sha256(decoder.weight(name)));
            }
        }
    }

    private static String sha256(NDArray array) throws NoSuchAlgorithmException {
        MessageDigest digest = MessageDigest.getInstance("SHA-256");
        if (array.getDevice().isGpu()) {
            try (NDArray host = array.toDevice(Device.cpu(), true)) {
                digest.update(host.toByteBuffer(true));
            }
        } else {
            digest.update(array.toByteBuffer(true));
        }
        StringBuilder hex = new StringBuilder();
        for (byte b : digest.digest()) {
            hex.append(String.format("%02x", b));
        }
        return hex.toString();
    }

    /** Resets VmHWM to the current resident size (Linux 4.0+); false where not allowed. */
    private static boolean resetPeak() {
        try {
            byte[] five = "5".getBytes(StandardCharsets.US_ASCII);
            Files.write(Paths.get("/proc/self/clear_refs"), five);
            return true;
        } catch (IOException | SecurityException e) {
            return false;
        }
    }

    private static long status(String key) throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (line.startsWith(key + ":")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        throw new IOException("no " + key + " in /proc/self/status");
    }
}
