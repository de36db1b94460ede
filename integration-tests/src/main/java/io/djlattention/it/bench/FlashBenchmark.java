/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.NDScope;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import io.djlattention.it.StockAttention;
import java.util.Arrays;
import java.util.Locale;
import java.util.function.Supplier;

/**
 * {@link AttentionOps#flashAttention} against stock DJL attention (matMul, scale, mask, softmax,
 * matMul in the inputs' dtype, as a DJL model computes it) on DJL's default device — the GPU when
 * the PyTorch engine sees one — in float32 and float16, and the host cost of one DJL operator
 * call.
 *
 * <p>Each cell: 2 warm-up batches, then the median of 5 batches of 10 calls queued back to back
 * and completed by one read of one element (which waits for the device), divided by 10. The error
 * column is the largest |flash − reference| over the first batch row, relative to the largest
 * |reference|, against a float64 reference computed by stock DJL ops from the same (rounded)
 * inputs ({@link StockAttention}).
 *
 * <p>The last table times 2000 calls of a tiny DJL {@code add} and of a tiny {@code
 * flash_attention} with one wait at the end: on a GPU the device work of each is a few
 * microseconds, so the time per call is what the host spends (JNI, DJL, the dispatcher, the
 * launch). Multiplied by the operator calls of a decode step it says how much of the step the host
 * takes.
 *
 * <p>Run: {@code java -cp <integration-tests class path> io.djlattention.it.bench.FlashBenchmark}
 * ({@code integration-tests/scripts/gpu-java-suite.sh} runs it on the GPU machine).
 */
public final class FlashBenchmark {

    private static final int WARMUP = 2;
    private static final int SAMPLES = 5;
    private static final int CALLS = 10;

    /** {B, Sq, Sk, Hq, Hkv, D}. */
    private static final int[][] SHAPES = {
        {8, 128, 128, 12, 12, 64},
        {1, 512, 512, 16, 16, 64},
        {2, 1024, 1024, 16, 16, 64},
        {4, 2048, 2048, 16, 16, 128},
        {1, 4096, 4096, 32, 8, 128},
        {16, 1, 2048, 32, 8, 128},
    };

    private FlashBenchmark() {}

    /**
     * Runs the benchmark and prints Markdown tables.
     *
     * @param args optional: {@code --shapes "B,Sq,Sk,Hq,Hkv,D;..."} in place of the default list
     */
    public static void main(String[] args) {
        int[][] shapes = SHAPES;
        if (args.length == 2 && "--shapes".equals(args[0])) {
            shapes =
                    Arrays.stream(args[1].split(";"))
                            .map(shape -> BenchSupport.ints(shape, "--shapes"))
                            .toArray(int[][]::new);
        } else if (args.length != 0) {
            throw new IllegalArgumentException(
                    "usage: FlashBenchmark [--shapes \"B,Sq,Sk,Hq,Hkv,D;...\"]");
        }
        Engine engine = Engine.getEngine("PyTorch");
        System.out.printf(
                Locale.ROOT,
                "Flash vs stock DJL on %s (%s %s); median of %d batches of %d queued calls%n%n",
                engine.defaultDevice(),
                engine.getEngineName(),
                engine.getVersion(),
                SAMPLES,
                CALLS);
        System.out.println(
                "| shape [B,Sq,Sk,Hq,Hkv,D] | causal | dtype | stock ms | flash ms | speed-up"
                        + " | flash rel err | stock rel err |");
        System.out.println("| --- | --- | --- | --- | --- | --- | --- | --- |");
        for (int[] s : shapes) {
            for (boolean causal : new boolean[] {false, true}) {
                if (s[1] == 1 && causal) {
                    continue; // one query row: causal is the same computation
                }
                for (DataType dtype : new DataType[] {DataType.FLOAT32, DataType.FLOAT16}) {
                    System.out.println(row(s, causal, dtype));
                }
            }
        }
        System.out.println();
        hostCost();
    }

    private static String row(int[] s, boolean causal, DataType dtype) {
        try (NDManager manager = NDManager.newBaseManager()) {
            Engine.getInstance().setRandomSeed(s[1] * 31 + s[2]);
            NDArray q = random(manager, new Shape(s[0], s[1], s[3], s[5]), dtype);
            NDArray k = random(manager, new Shape(s[0], s[2], s[4], s[5]), dtype);
            NDArray v = random(manager, new Shape(s[0], s[2], s[4], s[5]), dtype);
            double scale = 1.0 / Math.sqrt(s[5]);
            AttentionOptions options = AttentionOptions.builder().optCausal(causal).build();

            NDIndex first = new NDIndex("0:1");
            NDArray q0 = q.get(first);
            NDArray k0 = k.get(first);
            NDArray v0 = v.get(first);
            NDArray reference = StockAttention.attention(q0, k0, v0, causal, scale, null).get(0);
            double refMax = reference.abs().max().getDouble();
            double flashErr =
                    relError(AttentionOps.flashAttention(q0, k0, v0, options), reference, refMax);
            double stockErr = relError(stock(q0, k0, v0, causal, scale), reference, refMax);

            double stockMs = millis(() -> stock(q, k, v, causal, scale));
            double flashMs = millis(() -> AttentionOps.flashAttention(q, k, v, options));
            return String.format(
                    Locale.ROOT,
                    "| %s | %s | %s | %.3f | %.3f | %.2fx | %.1e | %.1e |",
                    Arrays.toString(s),
                    causal,
                    dtype == DataType.FLOAT32 ? "float32" : "float16",
                    stockMs,
                    flashMs,
                    stockMs / flashMs,
                    flashErr,
                    stockErr);
        }
    }

    private static NDArray random(NDManager manager, Shape shape, DataType dtype) {
        return manager.randomNormal(shape).toType(dtype, false);
    }

    /** What a stock DJL model computes, in the inputs' dtype. */
    static NDArray stock(NDArray q, NDArray k, NDArray v, boolean causal, double scale) {
        long group = q.getShape().get(2) / k.getShape().get(2);
        NDArray qt = q.transpose(0, 2, 1, 3);
        NDArray kt = k.transpose(0, 2, 1, 3);
        NDArray vt = v.transpose(0, 2, 1, 3);
        if (group > 1) {
            kt = kt.repeat(1, group);
            vt = vt.repeat(1, group);
        }
        NDArray scores = qt.matMul(kt.transpose(0, 1, 3, 2)).mul(scale);
        if (causal) {
            long sq = q.getShape().get(1);
            long sk = k.getShape().get(1);
            NDManager m = q.getManager();
            NDArray i = m.arange(sq).reshape(sq, 1);
            NDArray j = m.arange(sk).reshape(1, sk);
            NDArray hidden = j.gt(i.add(sk - sq));
            // An additive -1e4 (finite in float16, exp() of it is 0 in both dtypes).
            scores = scores.add(hidden.toType(q.getDataType(), false).mul(-1e4f));
        }
        return scores.softmax(-1).matMul(vt).transpose(0, 2, 1, 3);
    }

    private static double relError(NDArray out, NDArray reference, double refMax) {
        double err = out.toType(DataType.FLOAT64, false).sub(reference).abs().max().getDouble();
        return err / Math.max(refMax, Double.MIN_NORMAL);
    }

    /** Median milliseconds per call: batches of {@link #CALLS} queued calls, one wait each. */
    private static double millis(Supplier<NDArray> work) {
        double[] times = new double[SAMPLES];
        for (int sample = -WARMUP; sample < SAMPLES; ++sample) {
            double ms = timeCalls(CALLS, work) * 1e3;
            if (sample >= 0) {
                times[sample] = ms;
            }
        }
        Arrays.sort(times);
        return times[SAMPLES / 2];
    }

    /**
     * Seconds per call of {@code calls} calls queued back to back, then one wait for the device.
     * Each call's intermediates are freed when it returns (an {@link NDScope} per call), and its
     * output when the next one returns, as a model's forward would.
     */
    @SuppressWarnings("try")
    private static double timeCalls(int calls, Supplier<NDArray> work) {
        long start = System.nanoTime();
        NDArray last = null;
        for (int c = 0; c < calls; ++c) {
            NDArray out;
            try (NDScope ignore = new NDScope()) {
                out = work.get();
                NDScope.unregister(out);
            }
            if (last != null) {
                last.close();
            }
            last = out;
        }
        // Reading one element waits for everything queued on the device's stream.
        try (NDArray one = last.flatten().get(0).toType(DataType.FLOAT32, false)) {
            one.getFloat();
        }
        last.close();
        return (System.nanoTime() - start) / 1e9 / calls;
    }

    /** Host microseconds per DJL op call and per djl_attn operator call, on tiny inputs. */
    private static void hostCost() {
        int calls = 2000;
        try (NDManager manager = NDManager.newBaseManager()) {
            NDArray a = manager.randomNormal(new Shape(1, 4, 2, 8));
            NDArray b = manager.randomNormal(new Shape(1, 4, 2, 8));
            AttentionOptions options = AttentionOptions.builder().build();
            double addUs = 0;
            double flashUs = 0;
            double syncUs = 0;
            for (int round = 0; round < 3; ++round) { // the last round counts, after warm-up
                addUs = timeCalls(calls, () -> a.add(b)) * 1e6;
                flashUs =
                        timeCalls(calls, () -> AttentionOps.flashAttention(a, a, b, options))
                                * 1e6;
                long start = System.nanoTime();
                for (int c = 0; c < calls; ++c) {
                    try (NDArray sum = a.add(b)) {
                        sum.toFloatArray(); // waits for the device and copies back
                    }
                }
                syncUs = (System.nanoTime() - start) / 1e3 / calls;
            }
            System.out.printf(
                    Locale.ROOT,
                    "| host cost per call on %s | µs |%n| --- | --- |%n| DJL add (1 op) | %.1f |%n"
                            + "| AttentionOps.flashAttention | %.1f |%n"
                            + "| DJL add, then read the result back (a host sync) | %.1f |%n",
                    manager.getDevice(),
                    addUs,
                    flashUs,
                    syncUs);
        }
    }
}
