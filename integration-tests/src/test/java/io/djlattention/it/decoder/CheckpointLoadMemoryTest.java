/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.decoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.Device;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import io.djlattention.it.HfFixtures;
import io.djlattention.it.TestDevice;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.HfDecoderLoader;
import io.djlattention.zoo.hf.HfCheckpoint;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A Hugging Face checkpoint of a few hundred MB (a random LLaMA written by transformers in
 * bfloat16, three shards; make_checkpoint_load.py) loads holding its weights once: in a fresh JVM
 * whose heap (256 MB, pre-touched) and direct memory (64 MB) could not hold a copy of the weights,
 * the resident size peaks at most 1.2x the weights above where it was before the load (measured:
 * 1.04x as float32, 1.07x as float16; the code before this test: 2.19x and 4.34x). On a GPU the
 * same host bound holds, and the GPU memory in use grows by at most 1.1x the weights plus 64 MB: a
 * constant for the 16 MB host-to-device stage and the caching allocator's 20 MB segments, 3% of a
 * 2.5 GB checkpoint, but 40% of this one. And every parameter is exactly torch's {@code
 * tensor.to(dtype)} of the stored values (SHA-256 of the bytes against the Python reference's).
 */
class CheckpointLoadMemoryTest {

    @ParameterizedTest
    @ValueSource(strings = {"float32", "float16"})
    void loadHoldsTheWeightsOnceAndGivesTorchsValues(String dtype) throws Exception {
        Path dir = HfFixtures.dir("checkpoint_load").resolve("llama");
        Device device = TestDevice.get();
        Map<String, String> out = new HashMap<>();
        Map<String, String> hashes = new HashMap<>();
        String log = runProbe(dir, dtype, device, out, hashes);

        DataType type = "float16".equals(dtype) ? DataType.FLOAT16 : DataType.FLOAT32;
        long expectedBytes = 0;
        for (Shape s :
                Decoder.parameterShapes(HfDecoderLoader.readConfig(HfCheckpoint.open(dir), type))
                        .values()) {
            expectedBytes += s.size() * type.getNumOfBytes();
        }
        long weights = Long.parseLong(out.get("weightBytes"));
        assertEquals(expectedBytes, weights, log);
        double hostPeak =
                (Long.parseLong(out.get("peakKiB")) - Long.parseLong(out.get("rssBeforeKiB")))
                        * 1024.0;
        double hostBound = 1.2 * weights;
        assertTrue(
                hostPeak <= hostBound,
                String.format(
                        "host resident size grew by %.1f MB during the load, bound %.1f MB (weights"
                                + " %.1f MB)%n%s",
                        hostPeak / 1e6, hostBound / 1e6, weights / 1e6, log));
        if (device.isGpu()) {
            // The caching allocator keeps what it freed: growth in use >= the load's peak.
            long gpu =
                    Long.parseLong(out.get("gpuUsedAfter"))
                            - Long.parseLong(out.get("gpuUsedBefore"));
            double gpuBound = 1.1 * weights + (64 << 20);
            assertTrue(
                    gpu <= gpuBound,
                    String.format(
                            "GPU memory in use grew by %.1f MB, bound %.1f MB%n%s",
                            gpu / 1e6, gpuBound / 1e6, log));
        }

        Path reference = dir.resolve("expected_sha256.json");
        JsonObject expected =
                JsonParser.parseString(Files.readString(reference, StandardCharsets.UTF_8))
                        .getAsJsonObject();
        assertEquals(
                expected.size(), hashes.size(), "every tensor of the checkpoint is used\n" + log);
        for (String name : expected.keySet()) {
            assertEquals(
                    expected.getAsJsonObject(name).get(dtype).getAsString(),
                    hashes.get(name),
                    name + " as " + dtype);
        }
    }

    /** Runs CheckpointLoadProbe in a JVM of its own; returns its output. */
    private static String runProbe(
            Path dir,
            String dtype,
            Device device,
            Map<String, String> out,
            Map<String, String> hashes)
            throws Exception {
        String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
        List<String> command =
                new ArrayList<>(
                        List.of(
                                java,
                                // A heap and direct memory too small for a second copy of the
                                // weights; pre-touched so the heap's own growth is not counted.
                                "-Xms256m",
                                "-Xmx256m",
                                "-XX:+AlwaysPreTouch",
                                "-XX:MaxDirectMemorySize=64m"));
        // The child runs as this JVM does: the same DJL, JavaCPP and project settings.
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith("ai.djl.")
                    || name.startsWith("djl.attn.")
                    || name.startsWith("org.bytedeco.")) {
                command.add("-D" + name + "=" + System.getProperty(name));
            }
        }
        command.addAll(
                List.of(
                        "-cp",
                        System.getProperty("java.class.path"),
                        CheckpointLoadProbe.class.getName(),
                        dir.toString(),
                        dtype,
                        device.isGpu() ? "gpu" + device.getDeviceId() : "cpu"));
        Path log = Files.createTempFile("checkpoint-load", ".log");
        try {
            Process p =
                    new ProcessBuilder(command)
                            .redirectErrorStream(true)
                            .redirectOutput(log.toFile())
                            .start();
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError(
                        "CheckpointLoadProbe ran past 120 s:\n" + Files.readString(log));
            }
            String text = Files.readString(log);
            assertEquals(0, p.exitValue(), "CheckpointLoadProbe failed:\n" + text);
            StringBuilder summary = new StringBuilder();
            for (String line : text.split("\n")) {
                String[] f = line.trim().split(" ");
                if (f.length == 3 && "sha256".equals(f[0])) {
                    hashes.put(f[1], f[2]);
                } else if (f.length == 2) {
                    out.put(f[0], f[1]);
                    summary.append(line).append('\n');
                }
            }
            return summary.toString();
        } finally {
            Files.deleteIfExists(log);
        }
    }
}
