/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.NDScope;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Parameter;
import ai.djl.nn.norm.LayerNorm;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

import io.djlattention.AttentionOps;
import io.djlattention.EncoderLayerOps;
import io.djlattention.GemmMode;
import io.djlattention.zoo.hf.HfCheckpoint;

import java.io.DataInputStream;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * A BERT encoder as Hugging Face's {@code BertModel} (and the masked-LM head of {@code
 * BertForMaskedLM}) defines it, for inference, with three paths over the same weights, chosen
 * when the block is built ({@link Builder#optAttention}; {@link #withAttention} gives a view that
 * runs another).
 *
 * <ul>
 *   <li>{@link Attention#FUSED} (default), padding-free: the valid tokens are packed into {@code
 *       [N, C]} rows ({@code cu_seqlens}); on the CPU each layer is one {@link
 *       EncoderLayerOps#encoderLayer} call on weights packed once for the CPU's GEMM
 *       (docs/design/fused-encoder-layer.md), elsewhere {@link Attention#OP_BY_OP}. Pooling and
 *       the masked-LM head read the packed rows.
 *   <li>{@link Attention#OP_BY_OP}: the same packing, each layer as a Q/K/V GEMM, {@link
 *       AttentionOps#flashAttentionVarlen}, {@link AttentionOps#addBiasResidualLayerNorm}, {@link
 *       AttentionOps#addBiasGelu} and GEMMs: the fused layer's tested reference.
 *   <li>{@link Attention#STOCK}: plain DJL NDArray ops on the padded batch, as transformers' eager
 *       attention computes it: the baseline.
 * </ul>
 *
 * <p>As a DJL block ({@link #forward}), the inputs are {@code [inputIds (B, S), tokenTypeIds (B,
 * S), attentionMask (B, S)]} (integers, attention mask 1 = token, 0 = padding; right padding is the
 * fast case, any 0/1 mask with at least one token per row is accepted), plus {@code maskedPositions
 * (B, P)} int64 for {@link Output#MASKED_LM}. The output is one array, chosen when the block is
 * built ({@link Builder#optOutput}):
 *
 * <ul>
 *   <li>{@link Output#LAST_HIDDEN_STATE}: {@code (B, S, C)} in the compute dtype; on the fused path
 *       the rows of padding positions are 0 (the stock path computes them, as transformers does;
 *       no valid position depends on them);
 *   <li>{@link Output#SENTENCE_EMBEDDING}: {@code (B, C)} float32, the mean of the valid tokens
 *       ({@link Pooling#MEAN}, as sentence-transformers) or the first valid token ({@link
 *       Pooling#CLS}), not normalised (the translator normalises);
 *   <li>{@link Output#MASKED_LM}: {@code (B, P, V)} float32 logits of the masked-LM head at the
 *       given positions (needs {@link Builder#optMaskedLmHead}).
 * </ul>
 *
 * <p>The same computations are public methods ({@link #lastHiddenState}, {@link
 * #sentenceEmbeddings}, {@link #maskedLmLogits}) for callers outside a {@link
 * ai.djl.inference.Predictor}.
 *
 * <p>Parameters carry Hugging Face names and shapes ({@link #parameterShapes}): {@code
 * embeddings.word_embeddings.weight [V, C]}, {@code embeddings.position_embeddings.weight [P,
 * C]}, {@code embeddings.token_type_embeddings.weight [T, C]}, {@code
 * embeddings.LayerNorm.{weight,bias}}, per layer {@code encoder.layer.i.attention.self.{query,key,
 * value}.{weight [C, C],bias}}, {@code ...attention.output.dense.*}, {@code
 * ...attention.output.LayerNorm.*}, {@code ...intermediate.dense.{weight [I, C],bias}}, {@code
 * ...output.dense.{weight [C, I],bias}}, {@code ...output.LayerNorm.*}, and with the head {@code
 * cls.predictions.transform.dense.*}, {@code cls.predictions.transform.LayerNorm.*}, {@code
 * cls.predictions.bias [V]} (the decoder weight is the word embedding, or {@code
 * cls.predictions.decoder.weight} when the configuration unties it). They are float32; {@link
 * Builder#optComputeDataType optComputeDataType(FLOAT16)} runs the GEMMs and attention in float16
 * from float16 copies made once, with float32 LayerNorm statistics and parameters (meant for GPUs;
 * the CPU runs it too, slower than float32, see {@link EncoderModels}).
 *
 * <p>Derived arrays (the concatenated Q/K/V weight, float16 copies) are made when the weights are
 * set or loaded; the block does not train ({@code forward} with {@code training} fails). The
 * block's weights live on one device, the one of the manager given to {@link #setWeights}; inputs
 * on another device are refused. One block may serve several threads at once.
 */
public final class BertEncoder extends AbstractBlock {

    /** Which implementation runs the encoder. */
    public enum Attention {
        /**
         * Packed valid tokens; on the CPU one {@code encoder_layer} call per layer (weights packed
         * for the CPU's GEMM once), elsewhere {@link #OP_BY_OP}.
         */
        FUSED,
        /**
         * Packed valid tokens, each layer as a dozen fused operators (Q/K/V GEMM, varlen flash
         * attention, fused epilogues): the tested reference of {@code encoder_layer}.
         */
        OP_BY_OP,
        /** Stock DJL NDArray ops on the padded batch: the baseline. */
        STOCK
    }

    /** What {@link #forward} returns. */
    public enum Output {
        /** {@code (B, S, C)}: the encoder's last hidden state. */
        LAST_HIDDEN_STATE,
        /** {@code (B, C)} float32: pooled sentence embeddings (not normalised). */
        SENTENCE_EMBEDDING,
        /** {@code (B, P, V)} float32: masked-LM logits at the positions of a fourth input. */
        MASKED_LM
    }

    /** How token states become one sentence embedding. */
    public enum Pooling {
        /** The mean over the attention mask (sentence-transformers' mean pooling). */
        MEAN,
        /** The first valid token's state ({@code [CLS]}, as bge models pool). */
        CLS
    }

    private static final byte VERSION = 1;
    private static final String PREFIX = "bert.";

    private final BertEncoderConfig config;
    private final boolean maskedLmHead;
    private final DataType computeDataType;
    private final Output output;
    private final Pooling pooling;
    private final Attention attention;
    private final GemmMode gemm;
    private final EncoderPasses passes;
    /** The block whose weights this one reads: itself, or the source of a {@link #withAttention}. */
    private final BertEncoder root;
    private final Map<String, Parameter> weights = new LinkedHashMap<>();
    private volatile EncoderWeights prepared;

    private BertEncoder(Builder b) {
        super(VERSION);
        config = b.config;
        maskedLmHead = b.maskedLmHead;
        computeDataType = b.computeDataType;
        output = b.output;
        pooling = b.pooling;
        attention = b.attention;
        gemm = b.gemm;
        passes = new EncoderPasses(config, computeDataType);
        root = this;
        for (String name : parameterShapes(config, maskedLmHead).keySet()) {
            weights.put(
                    name,
                    addParameter(
                            Parameter.builder()
                                    .setName(name)
                                    .setType(typeOf(name))
                                    .optRequiresGrad(false)
                                    .build()));
        }
    }

    /**
     * Returns a builder.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    private static Parameter.Type typeOf(String name) {
        if (name.contains("LayerNorm")) {
            return name.endsWith(".bias") ? Parameter.Type.BETA : Parameter.Type.GAMMA;
        }
        return name.endsWith("bias") ? Parameter.Type.BIAS : Parameter.Type.WEIGHT;
    }

    /**
     * Returns the Hugging Face name and shape of every parameter, in model order.
     *
     * @param c the configuration
     * @param maskedLmHead whether the masked-LM head's parameters are included
     * @return name to shape
     */
    public static Map<String, Shape> parameterShapes(BertEncoderConfig c, boolean maskedLmHead) {
        return EncoderWeights.parameterShapes(c, maskedLmHead);
    }

    /**
     * Whether a set of tensors carries the masked-LM head ({@code cls.predictions.bias} and the
     * transform), under either naming ({@code BertForMaskedLM} has no prefix on the head).
     *
     * @param tensors tensors by name
     * @return whether the head is there
     */
    public static boolean hasMaskedLmHead(Map<String, ?> tensors) {
        return tensors.containsKey("cls.predictions.bias")
                && tensors.containsKey("cls.predictions.transform.dense.weight");
    }

    /**
     * Returns the configuration.
     *
     * @return the configuration
     */
    public BertEncoderConfig getConfig() {
        return config;
    }

    /**
     * Returns whether the block has the masked-LM head.
     *
     * @return whether {@link #maskedLmLogits} is available
     */
    public boolean hasMaskedLmHead() {
        return maskedLmHead;
    }

    /**
     * Returns the dtype the GEMMs and attention run in.
     *
     * @return float32 or float16
     */
    public DataType getComputeDataType() {
        return computeDataType;
    }

    /**
     * Returns what {@link #forward} returns.
     *
     * @return the output
     */
    public Output getOutput() {
        return output;
    }

    /**
     * Returns the pooling of {@link Output#SENTENCE_EMBEDDING}.
     *
     * @return the pooling
     */
    public Pooling getPooling() {
        return pooling;
    }

    /**
     * Returns the implementation that runs the encoder.
     *
     * @return FUSED or STOCK
     */
    public Attention getAttention() {
        return attention;
    }

    /**
     * Returns the arithmetic of the CPU fused path's GEMMs ({@link Builder#optGemm}).
     *
     * @return the mode
     */
    public GemmMode getGemm() {
        return gemm;
    }

    /**
     * Returns a block that runs another implementation over this block's weights (shared, not
     * copied: it reads whatever weights this block holds when it runs). Its weights are set
     * through this block only.
     *
     * @param attention the implementation
     * @return this block if the implementation is its own, else a view
     */
    public BertEncoder withAttention(Attention attention) {
        Objects.requireNonNull(attention, "attention must not be null");
        return attention == this.attention ? this : new BertEncoder(this, attention);
    }

    private BertEncoder(BertEncoder source, Attention attention) {
        super(VERSION);
        config = source.config;
        maskedLmHead = source.maskedLmHead;
        computeDataType = source.computeDataType;
        output = source.output;
        pooling = source.pooling;
        this.attention = attention;
        gemm = source.gemm;
        passes = source.passes;
        root = source.root;
    }

    /**
     * Returns the device the weights are on, or {@code null} before they are set.
     *
     * @return the device
     */
    public Device getDevice() {
        EncoderWeights p = root.prepared;
        return p == null ? null : p.device;
    }

    /**
     * Returns a parameter's value by its Hugging Face name.
     *
     * @param name the name, as in {@link #parameterShapes}
     * @return the float32 array
     */
    public NDArray weight(String name) {
        Parameter p = root.weights.get(name);
        if (p == null) {
            throw new IllegalArgumentException("no parameter " + name);
        }
        return p.getArray();
    }

    // ---- weights ---------------------------------------------------------------------------

    /**
     * Sets every parameter from a checkpoint's tensors ({@link HfCheckpoint#readTensors}); a
     * missing tensor or a wrong shape fails naming the checkpoint's weights file and the tensor.
     * See {@link #setWeights(NDManager, Map)} for names, prefixes and types.
     *
     * @param manager the manager that owns the parameters (its device runs the model)
     * @param tensors the tensors by name
     * @param checkpoint the checkpoint they were read from
     * @throws MalformedModelException if a tensor is missing or has the wrong shape
     */
    public void setWeights(NDManager manager, Map<String, NDArray> tensors, HfCheckpoint checkpoint)
            throws MalformedModelException {
        setWeights(manager, tensors, checkpoint.getWeightsFile().toString(), checkpoint);
    }

    /**
     * Sets every parameter from tensors with Hugging Face names ({@link #parameterShapes}). A
     * leading {@code bert.} (as {@code BertForMaskedLM} saves the encoder) is dropped; tensors the
     * model does not use ({@code pooler.*}, {@code embeddings.position_ids}, {@code
     * cls.predictions.decoder.*} when tied) are ignored. Each tensor is copied as float32 to the
     * manager's device and attached to the manager (intermediate copies stay with the tensors'
     * own manager); the derived arrays are then made.
     *
     * @param manager the manager that owns the parameters (its device runs the model)
     * @param tensors the tensors by name, float32 or float16
     * @param source what the tensors were read from, for error messages
     * @throws MalformedModelException if a tensor is missing or has the wrong shape
     */
    public void setWeights(NDManager manager, Map<String, NDArray> tensors, String source)
            throws MalformedModelException {
        setWeights(manager, tensors, source, null);
    }

    private void setWeights(
            NDManager manager,
            Map<String, NDArray> tensors,
            String source,
            HfCheckpoint checkpoint)
            throws MalformedModelException {
        requireRoot();
        Map<String, NDArray> byName = new LinkedHashMap<>();
        for (Map.Entry<String, NDArray> e : tensors.entrySet()) {
            String name = e.getKey();
            byName.put(name.startsWith(PREFIX) ? name.substring(PREFIX.length()) : name, e.getValue());
        }
        Map<String, Shape> shapes = parameterShapes(config, maskedLmHead);
        EncoderWeights.checkTensors(byName, shapes, source, checkpoint);
        Device device = manager.getDevice();
        for (Map.Entry<String, Shape> e : shapes.entrySet()) {
            // duplicate() is a deep copy: a tensor read from a file may wrap a Java direct buffer
            // that only the source array keeps alive, and toType/toDevice to what it already is
            // return a tensor aliasing it. Intermediates stay with the source's manager.
            NDArray value =
                    byName.get(e.getKey())
                            .toDevice(device, false)
                            .toType(DataType.FLOAT32, false)
                            .duplicate();
            value.attach(manager);
            NDScope.unregister(value);
            Parameter old = weights.get(e.getKey());
            Parameter fresh =
                    Parameter.builder()
                            .setName(e.getKey())
                            .setType(old.getType())
                            .optRequiresGrad(false)
                            .optArray(value)
                            .build();
            parameters.put(e.getKey(), fresh);
            weights.put(e.getKey(), fresh);
            if (old.isInitialized()) {
                old.close();
            }
        }
        prepare(manager);
    }

    /** {@inheritDoc} */
    @Override
    public void loadParameters(NDManager manager, DataInputStream is)
            throws IOException, MalformedModelException {
        requireRoot();
        super.loadParameters(manager, is);
        prepare(manager);
    }

    /** Makes the derived arrays from the parameters, on the parameters' device. */
    private void prepare(NDManager manager) {
        EncoderWeights old = prepared;
        prepared =
                new EncoderWeights(
                        manager.newSubManager(
                                weight("embeddings.word_embeddings.weight").getDevice()),
                        this::weight,
                        config,
                        maskedLmHead,
                        computeDataType,
                        gemm);
        if (old != null) {
            old.manager.close();
        }
    }

    // ---- inference -------------------------------------------------------------------------

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        Shape ids = inputShapes[0];
        long c = config.getHiddenSize();
        switch (output) {
            case SENTENCE_EMBEDDING:
                return new Shape[] {new Shape(ids.get(0), c)};
            case MASKED_LM:
                return new Shape[] {
                    new Shape(ids.get(0), inputShapes[3].get(1), config.getVocabSize())
                };
            default:
                return new Shape[] {new Shape(ids.get(0), ids.get(1), c)};
        }
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        if (training) {
            throw new UnsupportedOperationException(
                    "BertEncoder runs inference only (forward with training = true)");
        }
        int expected = output == Output.MASKED_LM ? 4 : 3;
        if (inputs.size() != expected) {
            throw new IllegalArgumentException(
                    "expected "
                            + expected
                            + " inputs [inputIds, tokenTypeIds, attentionMask"
                            + (expected == 4 ? ", maskedPositions" : "")
                            + "] for output "
                            + output
                            + ", got "
                            + inputs.size());
        }
        NDArray result;
        switch (output) {
            case SENTENCE_EMBEDDING:
                result =
                        sentenceEmbeddings(
                                inputs.get(0), inputs.get(1), inputs.get(2), pooling, false);
                break;
            case MASKED_LM:
                result =
                        maskedLmLogits(inputs.get(0), inputs.get(1), inputs.get(2), inputs.get(3));
                break;
            default:
                result = lastHiddenState(inputs.get(0), inputs.get(1), inputs.get(2));
        }
        return new NDList(result);
    }

    /**
     * Computes the encoder's last hidden state.
     *
     * @param inputIds token ids {@code (B, S)}, integers in {@code [0, V)}, {@code S <=
     *     max_position_embeddings}
     * @param tokenTypeIds token types {@code (B, S)} in {@code [0, T)}, or {@code null} for zeros
     * @param attentionMask {@code (B, S)}, 1 = token, 0 = padding, at least one token per row
     * @return {@code (B, S, C)} in the compute dtype, attached to the manager of {@code inputIds};
     *     padding rows are 0 on the fused path
     */
    public NDArray lastHiddenState(NDArray inputIds, NDArray tokenTypeIds, NDArray attentionMask) {
        EncoderWeights p = requirePrepared();
        EncoderBatch batch = EncoderBatch.of(config, p.device, inputIds, tokenTypeIds, attentionMask);
        try (NDManager scope = NDManager.subManagerOf(inputIds)) {
            NDArray out;
            if (attention == Attention.STOCK) {
                out = passes.stock(p, batch, scope);
            } else {
                NDArray rows = passes.packed(p, batch, scope, attention == Attention.OP_BY_OP);
                out = passes.padded(rows, batch, scope);
            }
            return scope.ret(out);
        }
    }

    /**
     * Computes pooled sentence embeddings; on the fused path the pooling reads the packed token
     * rows, so the padded hidden state is never made.
     *
     * @param inputIds token ids {@code (B, S)}
     * @param tokenTypeIds token types {@code (B, S)}, or {@code null} for zeros
     * @param attentionMask {@code (B, S)}, 1 = token, 0 = padding, at least one token per row
     * @param pooling MEAN (over the mask) or CLS (the first valid token)
     * @param normalize whether to divide each embedding by its L2 norm ({@code max(norm, 1e-12)})
     * @return {@code (B, C)} float32, attached to the manager of {@code inputIds}
     */
    public NDArray sentenceEmbeddings(
            NDArray inputIds,
            NDArray tokenTypeIds,
            NDArray attentionMask,
            Pooling pooling,
            boolean normalize) {
        Objects.requireNonNull(pooling, "pooling must not be null");
        EncoderWeights p = requirePrepared();
        EncoderBatch batch = EncoderBatch.of(config, p.device, inputIds, tokenTypeIds, attentionMask);
        try (NDManager scope = NDManager.subManagerOf(inputIds)) {
            NDArray pooled;
            if (attention == Attention.STOCK) {
                NDArray hidden = passes.stock(p, batch, scope).toType(DataType.FLOAT32, false);
                if (pooling == Pooling.CLS) {
                    pooled = EncoderPasses.firstValid(hidden, batch, scope);
                } else {
                    // sentence-transformers: sum(x * mask) / clamp(sum(mask), 1e-9)
                    NDArray mask =
                            scope.create(batch.mask, new Shape(batch.batch, batch.seqLen, 1))
                                    .toType(DataType.FLOAT32, false);
                    pooled =
                            hidden.mul(mask)
                                    .sum(new int[] {1})
                                    .div(mask.sum(new int[] {1}).clip(1e-9, Float.MAX_VALUE));
                }
            } else {
                NDArray rows = passes.packed(p, batch, scope, attention == Attention.OP_BY_OP);
                if (pooling == Pooling.CLS) {
                    long[] first = new long[batch.batch];
                    for (int i = 0; i < first.length; ++i) {
                        first[i] = batch.cuSeqlens[i];
                    }
                    pooled = rows.get(scope.create(first)).toType(DataType.FLOAT32, false);
                } else {
                    pooled = passes.segmentMean(rows, batch, scope);
                }
            }
            if (normalize) {
                pooled = pooled.normalize(2, 1, 1e-12);
            }
            return scope.ret(pooled);
        }
    }

    /**
     * Computes the masked-LM head's logits at given positions: {@code decoder(LayerNorm(gelu(
     * dense(h))))} with the decoder weight tied to the word embedding (unless untied).
     *
     * @param inputIds token ids {@code (B, S)}
     * @param tokenTypeIds token types {@code (B, S)}, or {@code null} for zeros
     * @param attentionMask {@code (B, S)}, 1 = token, 0 = padding
     * @param maskedPositions integer {@code (B, P)}: positions in {@code [0, S)} of valid tokens
     * @return {@code (B, P, V)} float32 logits, attached to the manager of {@code inputIds}
     * @throws IllegalStateException if the block has no masked-LM head
     */
    public NDArray maskedLmLogits(
            NDArray inputIds,
            NDArray tokenTypeIds,
            NDArray attentionMask,
            NDArray maskedPositions) {
        if (!maskedLmHead) {
            throw new IllegalStateException(
                    "this BertEncoder has no masked-LM head (build it with optMaskedLmHead(true)"
                            + " from a checkpoint with cls.predictions.*)");
        }
        EncoderWeights p = requirePrepared();
        EncoderBatch batch = EncoderBatch.of(config, p.device, inputIds, tokenTypeIds, attentionMask);
        Shape ps = maskedPositions.getShape();
        if (ps.dimension() != 2 || ps.get(0) != batch.batch || ps.get(1) < 1) {
            throw new IllegalArgumentException(
                    "maskedPositions: expected (B, P) = ("
                            + batch.batch
                            + ", P >= 1), got "
                            + ps);
        }
        int count = Math.toIntExact(ps.get(1));
        long[] positions = EncoderBatch.toLongs(maskedPositions, "maskedPositions");
        long[] flat = new long[positions.length];
        for (int i = 0; i < positions.length; ++i) {
            int b = i / count;
            long t = positions[i];
            if (t < 0 || t >= batch.seqLen || batch.mask[b * batch.seqLen + (int) t] == 0) {
                throw new IllegalArgumentException(
                        "maskedPositions: row "
                                + b
                                + ": position "
                                + t
                                + " is not a valid token (S = "
                                + batch.seqLen
                                + ", attention mask 0 or out of range)");
            }
            flat[i] = (long) b * batch.seqLen + t;
        }
        try (NDManager scope = NDManager.subManagerOf(inputIds)) {
            NDArray rows;
            long c = config.getHiddenSize();
            if (attention == Attention.STOCK) {
                rows =
                        passes.stock(p, batch, scope)
                                .reshape(-1, c)
                                .get(scope.create(flat));
            } else {
                long[] packed = new long[flat.length];
                for (int i = 0; i < flat.length; ++i) {
                    packed[i] = batch.rowOf[(int) flat[i]];
                }
                rows = passes.packed(p, batch, scope, attention == Attention.OP_BY_OP).get(scope.create(packed));
            }
            NDArray logits = passes.maskedLmHead(p, rows);
            return scope.ret(logits.reshape(batch.batch, count, config.getVocabSize()));
        }
    }

    private void requireRoot() {
        if (root != this) {
            throw new IllegalStateException(
                    "this BertEncoder is a view (withAttention): set the weights on its source");
        }
    }

    private EncoderWeights requirePrepared() {
        EncoderWeights p = root.prepared;
        if (p == null) {
            throw new IllegalStateException(
                    "BertEncoder has no weights: call setWeights (or load through EncoderModels)");
        }
        return p;
    }


    /**
     * Builds a {@link BertEncoder}: the configuration is required, the rest optional.
     */
    public static final class Builder {

        private BertEncoderConfig config;
        private boolean maskedLmHead;
        private DataType computeDataType = DataType.FLOAT32;
        private Output output = Output.LAST_HIDDEN_STATE;
        private Pooling pooling = Pooling.MEAN;
        private Attention attention = Attention.FUSED;
        private GemmMode gemm = GemmMode.FLOAT32;

        Builder() {}

        /**
         * Sets the configuration (required).
         *
         * @param config the configuration
         * @return this builder
         */
        public Builder setConfig(BertEncoderConfig config) {
            this.config = config;
            return this;
        }

        /**
         * Sets whether the block has the masked-LM head (default false).
         *
         * @param maskedLmHead whether to include {@code cls.predictions.*}
         * @return this builder
         */
        public Builder optMaskedLmHead(boolean maskedLmHead) {
            this.maskedLmHead = maskedLmHead;
            return this;
        }

        /**
         * Sets the dtype of the GEMMs and attention (default float32).
         *
         * @param computeDataType float32 or float16
         * @return this builder
         */
        public Builder optComputeDataType(DataType computeDataType) {
            this.computeDataType = computeDataType;
            return this;
        }

        /**
         * Sets what {@link #forward} returns (default {@link Output#LAST_HIDDEN_STATE}).
         *
         * @param output the output
         * @return this builder
         */
        public Builder optOutput(Output output) {
            this.output = output;
            return this;
        }

        /**
         * Sets the pooling of {@link Output#SENTENCE_EMBEDDING} (default {@link Pooling#MEAN}).
         *
         * @param pooling the pooling
         * @return this builder
         */
        public Builder optPooling(Pooling pooling) {
            this.pooling = pooling;
            return this;
        }

        /**
         * Sets the implementation (default {@link Attention#FUSED}).
         *
         * @param attention FUSED, OP_BY_OP or STOCK
         * @return this builder
         */
        public Builder optAttention(Attention attention) {
            this.attention = attention;
            return this;
        }

        /**
         * Sets the arithmetic of the CPU fused path's GEMMs (default {@link GemmMode#FLOAT32}):
         * {@link GemmMode#BFLOAT16} or {@link GemmMode#INT8} (dynamic quantization) are opt-in
         * and need the float32 compute dtype; accuracy in docs/operators.md.
         *
         * @param gemm the mode
         * @return this builder
         */
        public Builder optGemm(GemmMode gemm) {
            this.gemm = gemm;
            return this;
        }

        /**
         * Runs the CPU fused path's GEMMs in bfloat16 (default false): {@code
         * optGemm(bfloat16Gemm ? BFLOAT16 : FLOAT32)}.
         *
         * @param bfloat16Gemm whether to use the bfloat16 mode
         * @return this builder
         */
        public Builder optBfloat16Gemm(boolean bfloat16Gemm) {
            return optGemm(bfloat16Gemm ? GemmMode.BFLOAT16 : GemmMode.FLOAT32);
        }

        /**
         * Builds the block, with parameters not yet set ({@link BertEncoder#setWeights}).
         *
         * @return the block
         */
        public BertEncoder build() {
            if (config == null) {
                throw new IllegalArgumentException("config: required (setConfig)");
            }
            if (computeDataType != DataType.FLOAT32 && computeDataType != DataType.FLOAT16) {
                throw new IllegalArgumentException(
                        "computeDataType: expected float32 or float16, got " + computeDataType);
            }
            Objects.requireNonNull(output, "output must not be null");
            Objects.requireNonNull(pooling, "pooling must not be null");
            Objects.requireNonNull(attention, "attention must not be null");
            Objects.requireNonNull(gemm, "gemm must not be null");
            if (gemm != GemmMode.FLOAT32 && computeDataType != DataType.FLOAT32) {
                throw new IllegalArgumentException(
                        "gemm: "
                                + gemm
                                + " needs the float32 compute dtype, got "
                                + computeDataType);
            }
            if (output == Output.MASKED_LM && !maskedLmHead) {
                throw new IllegalArgumentException(
                        "output MASKED_LM needs the masked-LM head (optMaskedLmHead(true))");
            }
            return new BertEncoder(this);
        }
    }
}
