/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli.ort;

import ai.onnxruntime.NodeInfo;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.TensorInfo;

import io.djlattention.zoo.encoder.MiniLm;

import java.io.IOException;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/**
 * all-MiniLM-L6-v2 on ONNX Runtime (CPU), from the same ONNX file the model zoo reads its weights
 * from ({@link MiniLm#onnxFile()}): the independent reference for the zoo's embeddings and the
 * baseline of the embedding benchmark.
 *
 * <p>The graph maps {@code input_ids}, {@code attention_mask} and {@code token_type_ids} (int64
 * {@code [batch, seq]}) to {@code last_hidden_state} (float32 {@code [batch, seq, 384]}). {@link
 * #embed} adds what sentence-transformers adds on top: mean pooling over the attention mask and L2
 * normalisation. Token types are all 0 (single sentences).
 *
 * <p>Not thread-safe for {@link #close()} against running calls; {@code embed} itself may be
 * called from several threads (ONNX Runtime sessions are).
 */
public final class OrtMiniLm implements AutoCloseable {

    /** The embedding width of all-MiniLM-L6-v2. */
    public static final int DIM = 384;

    private final OrtEnvironment env;
    private final OrtSession session;
    private final int intraOpThreads;
    private final int dim;
    private volatile boolean closed;

    private OrtMiniLm(OrtEnvironment env, OrtSession session, int intraOpThreads) {
        this.env = env;
        this.session = session;
        this.intraOpThreads = intraOpThreads;
        this.dim = outputWidth(session);
    }

    /** The last dimension of the graph's output when static (768 for a BERT-base export). */
    private static int outputWidth(OrtSession session) {
        try {
            for (NodeInfo info : session.getOutputInfo().values()) {
                if (info.getInfo() instanceof TensorInfo) {
                    long[] shape = ((TensorInfo) info.getInfo()).getShape();
                    if (shape.length == 3 && shape[2] > 0) {
                        return (int) shape[2];
                    }
                }
                break;
            }
        } catch (OrtException e) {
            throw new IllegalStateException("ONNX Runtime cannot describe the model's output", e);
        }
        return DIM;
    }

    /**
     * Opens an ONNX Runtime session on the built-in MiniLM file.
     *
     * @param intraOpThreads ONNX Runtime's intra-op thread count; 0 keeps its default session
     *     options (one thread per physical core)
     * @return the model; close it to free the session
     * @throws IOException if the model file cannot be extracted or the session cannot be created
     * @throws IllegalArgumentException if {@code intraOpThreads} is negative
     */
    public static OrtMiniLm create(int intraOpThreads) throws IOException {
        return create(MiniLm.onnxFile(), intraOpThreads);
    }

    /**
     * Opens an ONNX Runtime session on a MiniLM-shaped ONNX file (same inputs and output).
     *
     * @param onnxFile the model file
     * @param intraOpThreads ONNX Runtime's intra-op thread count; 0 keeps its default
     * @return the model
     * @throws IOException if the session cannot be created
     * @throws IllegalArgumentException if {@code intraOpThreads} is negative
     */
    public static OrtMiniLm create(Path onnxFile, int intraOpThreads) throws IOException {
        return create(onnxFile, intraOpThreads, null);
    }

    /**
     * Opens an ONNX Runtime session, optionally with ONNX Runtime's profiler on (a JSON trace of
     * every node's kernel time, written by {@link #endProfiling()}).
     *
     * @param onnxFile the model file
     * @param intraOpThreads ONNX Runtime's intra-op thread count; 0 keeps its default
     * @param profilePrefix the trace file's prefix (ONNX Runtime appends a time stamp and {@code
     *     .json}), or {@code null} for no profiling
     * @return the model
     * @throws IOException if the session cannot be created
     * @throws IllegalArgumentException if {@code intraOpThreads} is negative
     */
    public static OrtMiniLm create(Path onnxFile, int intraOpThreads, String profilePrefix)
            throws IOException {
        if (intraOpThreads < 0) {
            throw new IllegalArgumentException(
                    "intraOpThreads: expected >= 0 (0 = ONNX Runtime's default), got "
                            + intraOpThreads);
        }
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        try (OrtSession.SessionOptions options = new OrtSession.SessionOptions()) {
            // All graph optimizations (ORT's default, stated: the fair comparison of issue 24).
            options.setOptimizationLevel(OrtSession.SessionOptions.OptLevel.ALL_OPT);
            if (intraOpThreads > 0) {
                options.setIntraOpNumThreads(intraOpThreads);
            }
            if (profilePrefix != null) {
                options.enableProfiling(profilePrefix);
            }
            return new OrtMiniLm(
                    env, env.createSession(onnxFile.toString(), options), intraOpThreads);
        } catch (OrtException e) {
            throw new IOException(onnxFile + ": ONNX Runtime cannot open the model: " + e, e);
        }
    }

    /**
     * Returns the intra-op thread count this session was created with.
     *
     * @return the count; 0 for ONNX Runtime's default
     */
    public int getIntraOpThreads() {
        return intraOpThreads;
    }

    /**
     * Sentence embeddings: mean of the token embeddings over the attention mask, L2-normalised
     * (sentence-transformers' {@code all-MiniLM-L6-v2} pipeline).
     *
     * @param ids token ids {@code [batch][seq]}, rectangular (pad with any id where the mask is 0)
     * @param mask attention mask {@code [batch][seq]}: 1 for tokens, 0 for padding; every row has
     *     at least one 1
     * @return embeddings {@code [batch][384]}, each of unit length
     * @throws IllegalArgumentException if the arrays are empty, ragged, of different shapes, or a
     *     row's mask is all 0 or holds values other than 0 and 1
     * @throws IllegalStateException if ONNX Runtime fails or the model is closed
     */
    public float[][] embed(long[][] ids, long[][] mask) {
        float[][][] tokens = tokenEmbeddings(ids, mask);
        float[][] out = new float[tokens.length][dim];
        for (int b = 0; b < tokens.length; ++b) {
            double[] sum = new double[dim];
            long count = 0;
            for (int s = 0; s < tokens[b].length; ++s) {
                if (mask[b][s] != 0) {
                    ++count;
                    for (int d = 0; d < dim; ++d) {
                        sum[d] += tokens[b][s][d];
                    }
                }
            }
            double norm = 0;
            for (int d = 0; d < dim; ++d) {
                sum[d] /= count;
                norm += sum[d] * sum[d];
            }
            // sentence-transformers' Normalize: x / max(||x||, 1e-12)
            norm = Math.max(Math.sqrt(norm), 1e-12);
            for (int d = 0; d < dim; ++d) {
                out[b][d] = (float) (sum[d] / norm);
            }
        }
        return out;
    }

    /**
     * Token embeddings, the graph's {@code last_hidden_state}.
     *
     * @param ids token ids {@code [batch][seq]}, rectangular
     * @param mask attention mask {@code [batch][seq]} of 0 and 1, at least one 1 per row
     * @return {@code [batch][seq][384]}; rows at padded positions are whatever the graph computes
     *     there
     * @throws IllegalArgumentException if the inputs are malformed (see {@link #embed})
     * @throws IllegalStateException if ONNX Runtime fails or the model is closed
     */
    public float[][][] tokenEmbeddings(long[][] ids, long[][] mask) {
        if (closed) {
            throw new IllegalStateException("OrtMiniLm is closed");
        }
        int batch = validate(ids, mask);
        int seq = ids[0].length;
        LongBuffer idBuf = LongBuffer.allocate(batch * seq);
        LongBuffer maskBuf = LongBuffer.allocate(batch * seq);
        for (int b = 0; b < batch; ++b) {
            idBuf.put(ids[b]);
            maskBuf.put(mask[b]);
        }
        idBuf.flip();
        maskBuf.flip();
        long[] shape = {batch, seq};
        Map<String, OnnxTensor> inputs = new HashMap<>();
        try {
            inputs.put("input_ids", OnnxTensor.createTensor(env, idBuf, shape));
            inputs.put("attention_mask", OnnxTensor.createTensor(env, maskBuf, shape));
            inputs.put(
                    "token_type_ids",
                    OnnxTensor.createTensor(env, LongBuffer.allocate(batch * seq), shape));
            try (OrtSession.Result result = session.run(inputs)) {
                OnnxTensor out = (OnnxTensor) result.get(0);
                long[] outShape = out.getInfo().getShape();
                if (outShape.length != 3
                        || outShape[0] != batch
                        || outShape[1] != seq
                        || outShape[2] != dim) {
                    throw new IllegalStateException(
                            "ONNX Runtime returned shape " + java.util.Arrays.toString(outShape)
                                    + ", expected [" + batch + ", " + seq + ", " + dim + "]");
                }
                FloatBuffer data = out.getFloatBuffer();
                float[][][] tokens = new float[batch][seq][dim];
                for (int b = 0; b < batch; ++b) {
                    for (int s = 0; s < seq; ++s) {
                        data.get(tokens[b][s]);
                    }
                }
                return tokens;
            }
        } catch (OrtException e) {
            throw new IllegalStateException("ONNX Runtime failed on MiniLM: " + e, e);
        } finally {
            inputs.values().forEach(OnnxTensor::close);
        }
    }

    /**
     * Stops ONNX Runtime's profiler and writes its trace (sessions made with a profile prefix).
     *
     * @return the trace file's path
     * @throws IllegalStateException if ONNX Runtime fails
     */
    public String endProfiling() {
        try {
            return session.endProfiling();
        } catch (OrtException e) {
            throw new IllegalStateException("ONNX Runtime failed to end profiling: " + e, e);
        }
    }

    private static int validate(long[][] ids, long[][] mask) {
        if (ids == null || mask == null) {
            throw new IllegalArgumentException("ids and mask: expected arrays, got null");
        }
        if (ids.length == 0) {
            throw new IllegalArgumentException("ids: expected a batch of at least 1, got 0 rows");
        }
        if (mask.length != ids.length) {
            throw new IllegalArgumentException(
                    "mask: expected " + ids.length + " rows like ids, got " + mask.length);
        }
        int seq = ids[0] == null ? 0 : ids[0].length;
        if (seq == 0) {
            throw new IllegalArgumentException("ids: expected rows of at least 1 token, got 0");
        }
        for (int b = 0; b < ids.length; ++b) {
            if (ids[b] == null
                    || ids[b].length != seq
                    || mask[b] == null
                    || mask[b].length != seq) {
                throw new IllegalArgumentException(
                        "ids and mask: expected rectangular [" + ids.length + "][" + seq
                                + "] arrays, row " + b + " differs");
            }
            boolean any = false;
            for (long m : mask[b]) {
                if (m != 0 && m != 1) {
                    throw new IllegalArgumentException(
                            "mask: expected 0 or 1, got " + m + " in row " + b);
                }
                any |= m == 1;
            }
            if (!any) {
                throw new IllegalArgumentException(
                        "mask: row " + b + " has no token (all 0); nothing to pool");
            }
        }
        return ids.length;
    }

    /** Closes the session; closing twice is harmless. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            session.close();
        } catch (OrtException e) {
            throw new IllegalStateException("ONNX Runtime failed to close the session: " + e, e);
        }
    }
}
