/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Reads a checkpoint in llama2.c's legacy format into a LLaMA-style {@link Decoder}.
 *
 * <p>The format: 7 little-endian int32 ({@code dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, seq_len}; a negative vocab size means the classifier is stored separately), then
 * float32 arrays: token embedding {@code [V, dim]}, {@code rms_att [L, dim]}, {@code wq [L, dim,
 * dim]}, {@code wk [L, kv_dim, dim]}, {@code wv [L, kv_dim, dim]}, {@code wo [L, dim, dim]}, {@code
 * rms_ffn [L, dim]}, {@code w1 [L, hidden, dim]}, {@code w2 [L, dim, hidden]}, {@code w3 [L,
 * hidden, dim]}, {@code rms_final [dim]}, two legacy RoPE tables {@code [seq_len, head_dim / 2]}
 * (skipped: the decoder computes RoPE), and the classifier {@code [V, dim]} when not shared. Weight
 * matrices are {@code [out, in]}, as Hugging Face's; RoPE pairs are interleaved.
 */
public final class Llama2cLoader {

    private Llama2cLoader() {}

    /**
     * Reads the header of a checkpoint as a decoder configuration.
     *
     * @param file the checkpoint
     * @param dataType the decoder's data type (float32 or float16)
     * @return the configuration
     * @throws IOException if the file cannot be read or is not in the format
     */
    public static DecoderConfig readConfig(Path file, DataType dataType) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            return config(header(ch, file), dataType);
        }
    }

    /**
     * Loads a checkpoint.
     *
     * @param file the checkpoint
     * @param manager the manager that owns the parameters
     * @param dataType float32 or float16 (the file holds float32)
     * @return the decoder
     * @throws IOException if the file cannot be read or is not in the format
     */
    public static Decoder load(Path file, NDManager manager, DataType dataType) throws IOException {
        return load(ByteBuffer.wrap(Files.readAllBytes(file)), file.toString(), manager, dataType);
    }

    /**
     * Loads a checkpoint from a stream (for example a class path resource).
     *
     * @param in the checkpoint's bytes; read to the end, not closed
     * @param source the name errors give the checkpoint
     * @param manager the manager that owns the parameters
     * @param dataType float32 or float16 (the file holds float32)
     * @return the decoder
     * @throws IOException if the stream cannot be read or is not in the format
     */
    public static Decoder load(InputStream in, String source, NDManager manager, DataType dataType)
            throws IOException {
        return load(ByteBuffer.wrap(in.readAllBytes()), source, manager, dataType);
    }

    private static Decoder load(ByteBuffer all, String source, NDManager manager, DataType dataType)
            throws IOException {
        all.order(ByteOrder.LITTLE_ENDIAN);
        int[] h = header(all, source);
        DecoderConfig config = config(h, dataType);
        int dim = h[0];
        int hidden = h[1];
        int layers = h[2];
        int heads = h[3];
        int kvDim = h[4] * (dim / heads);
        int vocab = Math.abs(h[5]);
        int seqLen = h[6];
        long floats =
                (long) vocab * dim
                        + 2L * layers * dim
                        + 2L * layers * dim * dim
                        + 2L * layers * kvDim * dim
                        + 3L * layers * hidden * dim
                        + dim
                        + (long) seqLen * (dim / heads)
                        + (h[5] < 0 ? (long) vocab * dim : 0);
        long expected = 28 + floats * 4;
        if (all.limit() != expected) {
            throw new IOException(
                    source
                            + ": expected "
                            + expected
                            + " bytes for the header's sizes, found "
                            + all.limit());
        }
        all.position(28);
        FloatBuffer in = all.slice().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        Map<String, NDArray> t = new LinkedHashMap<>();
        try (NDManager temp = manager.newSubManager()) {
            t.put("model.embed_tokens.weight", take(temp, in, new Shape(vocab, dim)));
            perLayer(temp, in, t, layers, "input_layernorm.weight", new Shape(dim));
            perLayer(temp, in, t, layers, "self_attn.q_proj.weight", new Shape(dim, dim));
            perLayer(temp, in, t, layers, "self_attn.k_proj.weight", new Shape(kvDim, dim));
            perLayer(temp, in, t, layers, "self_attn.v_proj.weight", new Shape(kvDim, dim));
            perLayer(temp, in, t, layers, "self_attn.o_proj.weight", new Shape(dim, dim));
            perLayer(temp, in, t, layers, "post_attention_layernorm.weight", new Shape(dim));
            perLayer(temp, in, t, layers, "mlp.gate_proj.weight", new Shape(hidden, dim));
            perLayer(temp, in, t, layers, "mlp.down_proj.weight", new Shape(dim, hidden));
            perLayer(temp, in, t, layers, "mlp.up_proj.weight", new Shape(hidden, dim));
            t.put("model.norm.weight", take(temp, in, new Shape(dim)));
            in.position(in.position() + seqLen * (dim / heads));
            if (h[5] < 0) {
                t.put("lm_head.weight", take(temp, in, new Shape(vocab, dim)));
            }
            Decoder decoder = new Decoder(config);
            decoder.setWeights(manager, t);
            return decoder;
        }
    }

    private static int[] header(ByteBuffer b, String source) throws IOException {
        if (b.limit() < 28) {
            throw new IOException(source + ": shorter than the 28-byte llama2.c header");
        }
        int[] h = new int[7];
        for (int i = 0; i < 7; ++i) {
            h[i] = b.getInt(4 * i);
        }
        checkHeader(h, source);
        return h;
    }

    private static int[] header(FileChannel ch, Path file) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(28).order(ByteOrder.LITTLE_ENDIAN);
        while (b.hasRemaining()) {
            if (ch.read(b) < 0) {
                throw new IOException(file + ": shorter than the 28-byte llama2.c header");
            }
        }
        b.flip();
        int[] h = new int[7];
        for (int i = 0; i < 7; ++i) {
            h[i] = b.getInt();
        }
        checkHeader(h, file.toString());
        return h;
    }

    private static void checkHeader(int[] h, String source) throws IOException {
        if (h[0] <= 0
                || h[1] <= 0
                || h[2] <= 0
                || h[3] <= 0
                || h[4] <= 0
                || h[5] == 0
                || h[6] <= 0
                || h[0] % h[3] != 0
                || h[3] % h[4] != 0) {
            throw new IOException(
                    source + ": not a llama2.c checkpoint header: " + java.util.Arrays.toString(h));
        }
    }

    private static DecoderConfig config(int[] h, DataType dataType) {
        return DecoderConfig.builder()
                .setArchitecture(DecoderConfig.Architecture.LLAMA)
                .setHiddenSize(h[0])
                .setIntermediateSize(h[1])
                .setNumLayers(h[2])
                .setNumHeads(h[3])
                .optNumKvHeads(h[4])
                .setVocabSize(Math.abs(h[5]))
                .optMaxPositions(h[6])
                .optNormEps(1e-5f)
                .optRopeStyle(DecoderConfig.RopeStyle.INTERLEAVED)
                .optTieEmbeddings(h[5] > 0)
                .optDataType(dataType)
                .build();
    }

    private static NDArray take(NDManager m, FloatBuffer in, Shape shape) {
        float[] v = new float[Math.toIntExact(shape.size())];
        in.get(v);
        return m.create(v, shape);
    }

    private static void perLayer(
            NDManager m,
            FloatBuffer in,
            Map<String, NDArray> t,
            int layers,
            String suffix,
            Shape shape) {
        for (int l = 0; l < layers; ++l) {
            t.put("model.layers." + l + "." + suffix, take(m, in, shape));
        }
    }
}
