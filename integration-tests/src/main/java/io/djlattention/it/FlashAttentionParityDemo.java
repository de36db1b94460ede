/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it;

import ai.djl.engine.Engine;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import java.util.Arrays;

/**
 * The README's main job: loads djl-attention into DJL's PyTorch engine and compares
 * {@link AttentionOps#flashAttention} with stock DJL attention (matMul, softmax, matMul) on a few
 * shapes, printing the max error against a float64 reference and the time ratio of the two
 * float32 paths.
 */
public final class FlashAttentionParityDemo {

    private static final int TIMED_RUNS = 10;

    private FlashAttentionParityDemo() {}

    /**
     * Runs the comparison.
     *
     * @param args unused
     */
    public static void main(String[] args) {
        Engine engine = Engine.getEngine("PyTorch");
        System.out.printf(
                "djl-attention parity demo on %s %s, %s%n",
                engine.getEngineName(), engine.getVersion(), engine.defaultDevice());
        System.out.printf(
                "%-40s %-8s %12s %12s %12s %8s%n",
                "shape [B,Sq,Sk,Hq,Hkv,D]", "causal", "max |err|", "stock ms", "flash ms", "speedup");
        int[][] shapes = {
            {2, 128, 128, 8, 8, 64},
            {1, 1000, 1000, 4, 1, 80},
            {4, 1, 1024, 8, 2, 128},
            {2, 129, 257, 12, 12, 32},
            {1, 2048, 2048, 8, 8, 64},
        };
        double worst = 0;
        for (int[] s : shapes) {
            for (boolean causal : new boolean[] {false, true}) {
                worst = Math.max(worst, compare(s, causal));
            }
        }
        System.out.printf("worst max |err| = %.3g (float32 parity target <= 1e-5)%n", worst);
        if (!(worst <= 1e-5)) {
            System.exit(1);
        }
    }

    private static double compare(int[] s, boolean causal) {
        try (NDManager manager = NDManager.newBaseManager()) {
            NDArray q = manager.randomNormal(new Shape(s[0], s[1], s[3], s[5]));
            NDArray k = manager.randomNormal(new Shape(s[0], s[2], s[4], s[5]));
            NDArray v = manager.randomNormal(new Shape(s[0], s[2], s[4], s[5]));
            double scale = 1.0 / Math.sqrt(s[5]);
            AttentionOptions options = AttentionOptions.builder().optCausal(causal).build();

            NDArray flash = AttentionOps.flashAttention(q, k, v, options);
            NDArray reference = StockAttention.attention(q, k, v, causal, scale, null).get(0);
            double error =
                    flash.toType(DataType.FLOAT64, false).sub(reference).abs().max().getDouble();

            NDList inputs = new NDList(q, k, v);
            double stockMs =
                    medianMillis(manager, inputs, () -> stockFloat32(q, k, v, causal, scale));
            double flashMs =
                    medianMillis(
                            manager, inputs, () -> AttentionOps.flashAttention(q, k, v, options));
            System.out.printf(
                    "%-40s %-8s %12.3g %12.3f %12.3f %7.2fx%n",
                    Arrays.toString(s), causal, error, stockMs, flashMs, stockMs / flashMs);
            return error;
        }
    }

    /** What a stock DJL model computes: float32 matMul, mask, softmax, matMul. */
    private static NDArray stockFloat32(
            NDArray q, NDArray k, NDArray v, boolean causal, double scale) {
        long heads = q.getShape().get(2);
        long group = heads / k.getShape().get(2);
        NDArray qt = q.transpose(0, 2, 1, 3);
        NDArray kt = k.transpose(0, 2, 1, 3).repeat(1, group);
        NDArray vt = v.transpose(0, 2, 1, 3).repeat(1, group);
        NDArray scores = qt.matMul(kt.transpose(0, 1, 3, 2)).mul(scale);
        if (causal) {
            long sq = q.getShape().get(1);
            long sk = k.getShape().get(1);
            NDManager m = q.getManager();
            NDArray i = m.arange(sq).reshape(sq, 1);
            NDArray j = m.arange(sk).reshape(1, sk);
            NDArray hidden = j.gt(i.add(sk - sq));
            scores = scores.add(hidden.toType(DataType.FLOAT32, false).mul(-1e30f));
        }
        return scores.softmax(-1).matMul(vt).transpose(0, 2, 1, 3);
    }

    /**
     * Median wall time of {@code work} after one warm-up run. Each run's results are freed right
     * after it: the inputs are attached to a sub-manager for the run, so everything the run
     * creates from them goes to that sub-manager.
     */
    private static double medianMillis(NDManager parent, NDList inputs, Runnable work) {
        double[] times = new double[TIMED_RUNS];
        for (int r = -1; r < TIMED_RUNS; ++r) {
            try (NDManager run = parent.newSubManager()) {
                inputs.tempAttach(run);
                long start = System.nanoTime();
                work.run();
                if (r >= 0) {
                    times[r] = (System.nanoTime() - start) / 1e6;
                }
            }
        }
        Arrays.sort(times);
        return times[TIMED_RUNS / 2];
    }
}
