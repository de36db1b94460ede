/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.encoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.cli.ort.OrtMiniLm;
import io.djlattention.zoo.encoder.MiniLm;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.util.List;
import java.util.Map;

/**
 * {@link MiniLm#weights} on its own: the weights the ONNX reader maps (names, MatMul weights
 * transposed to {@code [out, in]}) run through a plain float64 Java BERT forward written here, and
 * the token embeddings must match ONNX Runtime's {@code last_hidden_state} of the same file, in a
 * padded batch. A weight mapped to the wrong layer, a missing transpose or a swapped query/key
 * moves the outputs by O(1).
 */
class MiniLmWeightsTest {

    private static final int H = 384;
    private static final int HEADS = 12;
    private static final int LAYERS = 6;

    @Test
    void weightsThroughAFloat64ForwardMatchOnnxRuntime() throws IOException {
        List<String> sentences =
                List.of(
                        "Hello!",
                        "The quick brown fox jumps over the lazy dog near the riverbank.",
                        "Embeddings map sentences of similar meaning to nearby vectors.");
        long[][] ids;
        long[][] mask;
        try (HuggingFaceTokenizer tokenizer =
                HuggingFaceTokenizer.builder()
                        .optTokenizerPath(MiniLm.tokenizerFile())
                        .optMaxLength(512)
                        .optTruncation(true)
                        .optPadding(true)
                        .build()) {
            Encoding[] enc = tokenizer.batchEncode(sentences);
            ids = new long[enc.length][];
            mask = new long[enc.length][];
            for (int i = 0; i < enc.length; ++i) {
                ids[i] = enc[i].getIds();
                mask[i] = enc[i].getAttentionMask();
            }
        }
        float[][][] ort;
        try (OrtMiniLm model = OrtMiniLm.create(2)) {
            ort = model.tokenEmbeddings(ids, mask);
        }
        try (NDManager manager = NDManager.newBaseManager()) {
            Map<String, NDArray> w = MiniLm.weights(manager);
            assertEquals(5 + 16 * LAYERS, w.size());
            for (NDArray a : w.values()) {
                assertEquals(DataType.FLOAT32, a.getDataType(), a.getName());
            }
            String last = "encoder.layer.5.";
            assertEquals(new Shape(1536, H), w.get(last + "intermediate.dense.weight").getShape());
            assertEquals(new Shape(H, 1536), w.get(last + "output.dense.weight").getShape());
            Reference ref = new Reference(w);
            double worst = 0;
            for (int b = 0; b < ids.length; ++b) {
                int len = 0;
                while (len < mask[b].length && mask[b][len] == 1) {
                    ++len;
                }
                double[][] ours = ref.forward(ids[b], len);
                for (int s = 0; s < len; ++s) {
                    for (int d = 0; d < H; ++d) {
                        worst = Math.max(worst, Math.abs(ours[s][d] - ort[b][s][d]));
                    }
                }
            }
            // Hidden states are O(1) (LayerNorm outputs scaled by gamma); float32 ONNX Runtime
            // against float64 differs by ~2e-6 (measured).
            assertTrue(worst < 2e-5, "max |float64 reference - ONNX Runtime| = " + worst);
        }
    }

    /** Hugging Face BertModel's forward in float64 over one unpadded sequence. */
    private static final class Reference {

        private final Map<String, double[]> w = new java.util.HashMap<>();

        Reference(Map<String, NDArray> weights) {
            for (Map.Entry<String, NDArray> e : weights.entrySet()) {
                float[] f = e.getValue().toFloatArray();
                double[] d = new double[f.length];
                for (int i = 0; i < f.length; ++i) {
                    d[i] = f[i];
                }
                w.put(e.getKey(), d);
            }
        }

        double[][] forward(long[] ids, int len) {
            double[] word = w.get("embeddings.word_embeddings.weight");
            double[] pos = w.get("embeddings.position_embeddings.weight");
            double[] type = w.get("embeddings.token_type_embeddings.weight");
            double[][] x = new double[len][H];
            for (int s = 0; s < len; ++s) {
                for (int d = 0; d < H; ++d) {
                    x[s][d] = word[(int) ids[s] * H + d] + pos[s * H + d] + type[d];
                }
            }
            layerNorm(x, "embeddings.LayerNorm");
            for (int l = 0; l < LAYERS; ++l) {
                String p = "encoder.layer." + l + ".";
                double[][] q = linear(x, p + "attention.self.query");
                double[][] k = linear(x, p + "attention.self.key");
                double[][] v = linear(x, p + "attention.self.value");
                double[][] ctx = attention(q, k, v);
                double[][] a = linear(ctx, p + "attention.output.dense");
                add(a, x);
                layerNorm(a, p + "attention.output.LayerNorm");
                double[][] inter = linear(a, p + "intermediate.dense");
                for (double[] row : inter) {
                    for (int i = 0; i < row.length; ++i) {
                        row[i] = 0.5 * row[i] * (1 + erf(row[i] / Math.sqrt(2)));
                    }
                }
                double[][] o = linear(inter, p + "output.dense");
                add(o, a);
                layerNorm(o, p + "output.LayerNorm");
                x = o;
            }
            return x;
        }

        private double[][] linear(double[][] x, String name) {
            double[] weight = w.get(name + ".weight"); // [out, in]
            double[] bias = w.get(name + ".bias");
            int in = x[0].length;
            int out = bias.length;
            double[][] y = new double[x.length][out];
            for (int s = 0; s < x.length; ++s) {
                for (int o = 0; o < out; ++o) {
                    double acc = bias[o];
                    int row = o * in;
                    for (int i = 0; i < in; ++i) {
                        acc += x[s][i] * weight[row + i];
                    }
                    y[s][o] = acc;
                }
            }
            return y;
        }

        private static double[][] attention(double[][] q, double[][] k, double[][] v) {
            int len = q.length;
            int dh = H / HEADS;
            double scale = 1 / Math.sqrt(dh);
            double[][] out = new double[len][H];
            double[] scores = new double[len];
            for (int h = 0; h < HEADS; ++h) {
                int off = h * dh;
                for (int i = 0; i < len; ++i) {
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j < len; ++j) {
                        double dot = 0;
                        for (int d = 0; d < dh; ++d) {
                            dot += q[i][off + d] * k[j][off + d];
                        }
                        scores[j] = dot * scale;
                        max = Math.max(max, scores[j]);
                    }
                    double sum = 0;
                    for (int j = 0; j < len; ++j) {
                        scores[j] = Math.exp(scores[j] - max);
                        sum += scores[j];
                    }
                    for (int j = 0; j < len; ++j) {
                        double p = scores[j] / sum;
                        for (int d = 0; d < dh; ++d) {
                            out[i][off + d] += p * v[j][off + d];
                        }
                    }
                }
            }
            return out;
        }

        private void layerNorm(double[][] x, String name) {
            double[] gamma = w.get(name + ".weight");
            double[] beta = w.get(name + ".bias");
            for (double[] row : x) {
                double mean = 0;
                for (double v : row) {
                    mean += v;
                }
                mean /= row.length;
                double var = 0;
                for (double v : row) {
                    var += (v - mean) * (v - mean);
                }
                var /= row.length;
                double inv = 1 / Math.sqrt(var + 1e-12);
                for (int i = 0; i < row.length; ++i) {
                    row[i] = (row[i] - mean) * inv * gamma[i] + beta[i];
                }
            }
        }

        private static void add(double[][] x, double[][] y) {
            for (int s = 0; s < x.length; ++s) {
                for (int d = 0; d < x[s].length; ++d) {
                    x[s][d] += y[s][d];
                }
            }
        }
    }

    /**
     * erf to ~1e-12 absolute: its Maclaurin series for |x| < 3 (alternating terms, summed until
     * they vanish), the continued fraction of erfc beyond.
     */
    static double erf(double x) {
        double a = Math.abs(x);
        double r;
        if (a < 3) {
            double term = a;
            double sum = a;
            double x2 = a * a;
            for (int n = 1; n < 200 && Math.abs(term) > 1e-17 * Math.abs(sum); ++n) {
                term *= -x2 / n;
                sum += term / (2 * n + 1);
            }
            r = 2 / Math.sqrt(Math.PI) * sum;
        } else {
            // erfc(a) = exp(-a^2)/sqrt(pi) * 1/(a + 1/2/(a + 1/(a + 3/2/(a + ...)))) (Lentz-free,
            // evaluated backwards from a fixed depth; at a >= 3, 60 levels reach double precision)
            double f = a;
            for (int n = 60; n >= 1; --n) {
                f = a + (n / 2.0) / f;
            }
            r = 1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / f;
        }
        return x < 0 ? -r : r;
    }
}
