/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.NDScope;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Parameter;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.LayerNorm;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import io.djlattention.zoo.hf.HfCheckpoint;

import java.io.DataInputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A BERT encoder as Hugging Face's {@code BertModel} (and the masked-LM head of {@code
 * BertForMaskedLM}) defines it, for inference, with two attention paths over the same weights.
 *
 * <ul>
 *   <li>{@link Attention#FUSED} (default), padding-free: the valid tokens of the batch are packed
 *       into {@code [N, C]} rows (prefix sums of the lengths, {@code cu_seqlens}); each layer runs
 *       one Q/K/V GEMM on a concatenated weight, {@link AttentionOps#flashAttentionVarlen}, the
 *       output projection, {@link AttentionOps#addBiasResidualLayerNorm}, the feed-forward GEMM,
 *       {@link AttentionOps#addBiasGelu} (erf), the second GEMM and {@code
 *       addBiasResidualLayerNorm} again. Pooling and the masked-LM head read the packed rows; only
 *       {@link Output#LAST_HIDDEN_STATE} scatters them back into the padded batch.
 *   <li>{@link Attention#STOCK}: plain DJL NDArray ops on the padded batch (embedding gathers,
 *       {@code layerNorm}, {@code Linear.linear}, {@code matMul}, {@code softmax} with an additive
 *       mask of {@code finfo.min}, {@code gelu}), as transformers' eager attention computes it: the
 *       baseline the fused path is compared with.
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
        /** Packed valid tokens, fused Q/K/V GEMM, varlen flash attention, fused epilogues. */
        FUSED,
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
    private volatile Attention attention;
    private final Map<String, Parameter> weights = new LinkedHashMap<>();
    private volatile Prepared prepared;

    private BertEncoder(Builder b) {
        super(VERSION);
        config = b.config;
        maskedLmHead = b.maskedLmHead;
        computeDataType = b.computeDataType;
        output = b.output;
        pooling = b.pooling;
        attention = b.attention;
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
        Map<String, Shape> shapes = new LinkedHashMap<>();
        long h = c.getHiddenSize();
        long inter = c.getIntermediateSize();
        shapes.put("embeddings.word_embeddings.weight", new Shape(c.getVocabSize(), h));
        shapes.put(
                "embeddings.position_embeddings.weight",
                new Shape(c.getMaxPositions(), h));
        shapes.put("embeddings.token_type_embeddings.weight", new Shape(c.getTypeVocabSize(), h));
        shapes.put("embeddings.LayerNorm.weight", new Shape(h));
        shapes.put("embeddings.LayerNorm.bias", new Shape(h));
        for (int l = 0; l < c.getNumLayers(); ++l) {
            String p = "encoder.layer." + l + ".";
            for (String proj : new String[] {"query", "key", "value"}) {
                shapes.put(p + "attention.self." + proj + ".weight", new Shape(h, h));
                shapes.put(p + "attention.self." + proj + ".bias", new Shape(h));
            }
            shapes.put(p + "attention.output.dense.weight", new Shape(h, h));
            shapes.put(p + "attention.output.dense.bias", new Shape(h));
            shapes.put(p + "attention.output.LayerNorm.weight", new Shape(h));
            shapes.put(p + "attention.output.LayerNorm.bias", new Shape(h));
            shapes.put(p + "intermediate.dense.weight", new Shape(inter, h));
            shapes.put(p + "intermediate.dense.bias", new Shape(inter));
            shapes.put(p + "output.dense.weight", new Shape(h, inter));
            shapes.put(p + "output.dense.bias", new Shape(h));
            shapes.put(p + "output.LayerNorm.weight", new Shape(h));
            shapes.put(p + "output.LayerNorm.bias", new Shape(h));
        }
        if (maskedLmHead) {
            shapes.put("cls.predictions.transform.dense.weight", new Shape(h, h));
            shapes.put("cls.predictions.transform.dense.bias", new Shape(h));
            shapes.put("cls.predictions.transform.LayerNorm.weight", new Shape(h));
            shapes.put("cls.predictions.transform.LayerNorm.bias", new Shape(h));
            shapes.put("cls.predictions.bias", new Shape(c.getVocabSize()));
            if (!c.isTieWordEmbeddings()) {
                shapes.put("cls.predictions.decoder.weight", new Shape(c.getVocabSize(), h));
            }
        }
        return shapes;
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
     * Chooses the implementation (both use the same weights; the choice may change between calls).
     *
     * @param attention FUSED or STOCK
     */
    public void setAttention(Attention attention) {
        this.attention = Objects.requireNonNull(attention, "attention must not be null");
    }

    /**
     * Returns the device the weights are on, or {@code null} before they are set.
     *
     * @return the device
     */
    public Device getDevice() {
        Prepared p = prepared;
        return p == null ? null : p.device;
    }

    /**
     * Returns a parameter's value by its Hugging Face name.
     *
     * @param name the name, as in {@link #parameterShapes}
     * @return the float32 array
     */
    public NDArray weight(String name) {
        Parameter p = weights.get(name);
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
        Map<String, NDArray> byName = new LinkedHashMap<>();
        for (Map.Entry<String, NDArray> e : tensors.entrySet()) {
            String name = e.getKey();
            byName.put(name.startsWith(PREFIX) ? name.substring(PREFIX.length()) : name, e.getValue());
        }
        Map<String, Shape> shapes = parameterShapes(config, maskedLmHead);
        for (Map.Entry<String, Shape> e : shapes.entrySet()) {
            NDArray array = byName.get(e.getKey());
            if (array == null) {
                // HfCheckpoint.require words the message as every loader does.
                String message = source + ": missing tensor " + e.getKey();
                if (checkpoint != null) {
                    try {
                        checkpoint.require(byName, e.getKey());
                    } catch (IOException missing) {
                        message = missing.getMessage();
                    }
                }
                throw new MalformedModelException(message);
            }
            if (!array.getShape().equals(e.getValue())) {
                throw new MalformedModelException(
                        source
                                + ": tensor "
                                + e.getKey()
                                + ": expected shape "
                                + e.getValue()
                                + " (from the configuration), got "
                                + array.getShape());
            }
            DataType type = array.getDataType();
            if (type != DataType.FLOAT32 && type != DataType.FLOAT16) {
                throw new MalformedModelException(
                        source
                                + ": tensor "
                                + e.getKey()
                                + ": expected float32, float16 or bfloat16 values, got "
                                + type);
            }
        }
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
        super.loadParameters(manager, is);
        prepare(manager);
    }

    /** Makes the derived arrays from the parameters, on the parameters' device. */
    private void prepare(NDManager manager) {
        Prepared old = prepared;
        prepared = new Prepared(manager.newSubManager(weight(
                "embeddings.word_embeddings.weight").getDevice()));
        if (old != null) {
            old.manager.close();
        }
    }

    /** The arrays the forward passes read, made once from the parameters. */
    private final class Prepared {
        final NDManager manager;
        final Device device;
        final NDArray word;
        final NDArray position;
        final NDArray type;
        final NDArray embNormWeight;
        final NDArray embNormBias;
        final List<Layer> layers = new ArrayList<>();
        final NDArray headWeight;
        final NDArray headBias;
        final NDArray headNormWeight;
        final NDArray headNormBias;
        final NDArray decoderWeight;
        final NDArray decoderBias;

        Prepared(NDManager manager) {
            this.manager = manager;
            device = manager.getDevice();
            word = weight("embeddings.word_embeddings.weight");
            position = weight("embeddings.position_embeddings.weight");
            type = weight("embeddings.token_type_embeddings.weight");
            embNormWeight = weight("embeddings.LayerNorm.weight");
            embNormBias = weight("embeddings.LayerNorm.bias");
            for (int l = 0; l < config.getNumLayers(); ++l) {
                layers.add(new Layer(this, "encoder.layer." + l + "."));
            }
            if (maskedLmHead) {
                headWeight = weight("cls.predictions.transform.dense.weight");
                headBias = weight("cls.predictions.transform.dense.bias");
                headNormWeight = weight("cls.predictions.transform.LayerNorm.weight");
                headNormBias = weight("cls.predictions.transform.LayerNorm.bias");
                decoderWeight =
                        config.isTieWordEmbeddings()
                                ? word
                                : weight("cls.predictions.decoder.weight");
                decoderBias = weight("cls.predictions.bias");
            } else {
                headWeight = null;
                headBias = null;
                headNormWeight = null;
                headNormBias = null;
                decoderWeight = null;
                decoderBias = null;
            }
        }

        /** An array owned by this set of derived arrays (it is freed with them). */
        NDArray own(NDArray array) {
            array.attach(manager);
            NDScope.unregister(array);
            return array;
        }

        /** The parameter in the compute dtype: itself in float32, else a copy made once. */
        NDArray compute(NDArray parameter) {
            return computeDataType == DataType.FLOAT32
                    ? parameter
                    : own(parameter.toType(computeDataType, true));
        }
    }

    /** One encoder layer's arrays: GEMM weights in the compute dtype, epilogue vectors float32. */
    private final class Layer {
        /** Concatenated query, key, value weight {@code [3C, C]} and bias {@code [3C]}. */
        final NDArray qkvWeight;
        final NDArray qkvBias;
        /** Views of the concatenated arrays for the stock path ({@code [C, C]}, {@code [C]}). */
        final NDArray[] stockWeights = new NDArray[3];
        final NDArray[] stockBiases = new NDArray[3];
        final NDArray outWeight;
        final NDArray outBias32;
        final NDArray outBias;
        final NDArray norm1Weight32;
        final NDArray norm1Bias32;
        final NDArray norm1Weight;
        final NDArray norm1Bias;
        final NDArray interWeight;
        final NDArray interBias32;
        final NDArray interBias;
        final NDArray ffnOutWeight;
        final NDArray ffnOutBias32;
        final NDArray ffnOutBias;
        final NDArray norm2Weight32;
        final NDArray norm2Bias32;
        final NDArray norm2Weight;
        final NDArray norm2Bias;

        Layer(Prepared p, String prefix) {
            String self = prefix + "attention.self.";
            NDArray w =
                    NDArrays.concat(
                            new NDList(
                                    weight(self + "query.weight"),
                                    weight(self + "key.weight"),
                                    weight(self + "value.weight")),
                            0);
            NDArray b =
                    NDArrays.concat(
                            new NDList(
                                    weight(self + "query.bias"),
                                    weight(self + "key.bias"),
                                    weight(self + "value.bias")),
                            0);
            qkvWeight = p.own(w.toType(computeDataType, false));
            qkvBias = p.own(b.toType(computeDataType, false));
            if (qkvWeight != w) {
                w.close();
            }
            if (qkvBias != b) {
                b.close();
            }
            long c = config.getHiddenSize();
            for (int i = 0; i < 3; ++i) {
                String range = (i * c) + ":" + ((i + 1) * c);
                stockWeights[i] = p.own(qkvWeight.get(new NDIndex(range)));
                stockBiases[i] = p.own(qkvBias.get(new NDIndex(range)));
            }
            outWeight = p.compute(weight(prefix + "attention.output.dense.weight"));
            outBias32 = weight(prefix + "attention.output.dense.bias");
            outBias = p.compute(outBias32);
            norm1Weight32 = weight(prefix + "attention.output.LayerNorm.weight");
            norm1Bias32 = weight(prefix + "attention.output.LayerNorm.bias");
            norm1Weight = p.compute(norm1Weight32);
            norm1Bias = p.compute(norm1Bias32);
            interWeight = p.compute(weight(prefix + "intermediate.dense.weight"));
            interBias32 = weight(prefix + "intermediate.dense.bias");
            interBias = p.compute(interBias32);
            ffnOutWeight = p.compute(weight(prefix + "output.dense.weight"));
            ffnOutBias32 = weight(prefix + "output.dense.bias");
            ffnOutBias = p.compute(ffnOutBias32);
            norm2Weight32 = weight(prefix + "output.LayerNorm.weight");
            norm2Bias32 = weight(prefix + "output.LayerNorm.bias");
            norm2Weight = p.compute(norm2Weight32);
            norm2Bias = p.compute(norm2Bias32);
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
        Prepared p = requirePrepared();
        Batch batch = Batch.of(config, p.device, inputIds, tokenTypeIds, attentionMask);
        try (NDManager scope = NDManager.subManagerOf(inputIds)) {
            NDArray out;
            if (attention == Attention.STOCK) {
                out = stockEncode(p, batch, scope);
            } else {
                NDArray rows = fusedEncode(p, batch, scope);
                long c = config.getHiddenSize();
                if (batch.rightPadded) {
                    out =
                            AttentionOps.restorePadding(
                                    rows, scope.create(batch.cuSeqlens), batch.seqLen);
                } else {
                    // Holes in the mask: gather from the rows plus one zero row.
                    NDArray zero = scope.zeros(new Shape(1, c), rows.getDataType());
                    NDArray padded = NDArrays.concat(new NDList(rows, zero), 0);
                    long[] index = new long[batch.batch * batch.seqLen];
                    Arrays.fill(index, batch.tokens);
                    for (int i = 0; i < batch.tokens; ++i) {
                        index[batch.flatIndex[i]] = i;
                    }
                    out =
                            padded.get(scope.create(index))
                                    .reshape(batch.batch, batch.seqLen, c);
                }
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
        Prepared p = requirePrepared();
        Batch batch = Batch.of(config, p.device, inputIds, tokenTypeIds, attentionMask);
        try (NDManager scope = NDManager.subManagerOf(inputIds)) {
            NDArray pooled;
            if (attention == Attention.STOCK) {
                NDArray hidden = stockEncode(p, batch, scope).toType(DataType.FLOAT32, false);
                if (pooling == Pooling.CLS) {
                    pooled = firstValid(hidden, batch, scope);
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
                NDArray rows = fusedEncode(p, batch, scope);
                if (pooling == Pooling.CLS) {
                    long[] first = new long[batch.batch];
                    for (int i = 0; i < first.length; ++i) {
                        first[i] = batch.cuSeqlens[i];
                    }
                    pooled = rows.get(scope.create(first)).toType(DataType.FLOAT32, false);
                } else {
                    pooled = segmentMean(rows, batch, scope);
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
        Prepared p = requirePrepared();
        Batch batch = Batch.of(config, p.device, inputIds, tokenTypeIds, attentionMask);
        Shape ps = maskedPositions.getShape();
        if (ps.dimension() != 2 || ps.get(0) != batch.batch || ps.get(1) < 1) {
            throw new IllegalArgumentException(
                    "maskedPositions: expected (B, P) = ("
                            + batch.batch
                            + ", P >= 1), got "
                            + ps);
        }
        int count = Math.toIntExact(ps.get(1));
        long[] positions = toLongs(maskedPositions, "maskedPositions");
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
                        stockEncode(p, batch, scope)
                                .reshape(-1, c)
                                .get(scope.create(flat));
            } else {
                long[] packed = new long[flat.length];
                for (int i = 0; i < flat.length; ++i) {
                    packed[i] = batch.rowOf[(int) flat[i]];
                }
                rows = fusedEncode(p, batch, scope).get(scope.create(packed));
            }
            NDArray x = rows.toType(DataType.FLOAT32, false);
            NDArray h = Linear.linear(x, p.headWeight, p.headBias).head();
            h = Activation.gelu(h);
            h = LayerNorm.layerNorm(
                            h,
                            new Shape(c),
                            p.headNormWeight,
                            p.headNormBias,
                            (float) config.getLayerNormEps())
                    .head();
            NDArray logits = Linear.linear(h, p.decoderWeight, p.decoderBias).head();
            return scope.ret(logits.reshape(batch.batch, count, config.getVocabSize()));
        }
    }

    private Prepared requirePrepared() {
        Prepared p = prepared;
        if (p == null) {
            throw new IllegalStateException(
                    "BertEncoder has no weights: call setWeights (or load through EncoderModels)");
        }
        return p;
    }

    /**
     * The fused, padding-free encoder.
     *
     * @return the packed last hidden state {@code [N, C]} in the compute dtype, row {@code i} the
     *     {@code i}-th valid token in row-major order
     */
    private NDArray fusedEncode(Prepared p, Batch batch, NDManager scope) {
        int n = batch.tokens;
        long c = config.getHiddenSize();
        int heads = config.getNumHeads();
        long d = config.getHeadDim();
        double eps = config.getLayerNormEps();
        // Embeddings of the packed tokens only: (word + type) + position, then LayerNorm as one
        // fused op (the position rows are the residual), as BertEmbeddings sums them.
        NDArray word = take(p.word, scope.create(batch.packedIds), scope);
        NDArray type = take(p.type, scope.create(batch.packedTypes), scope);
        NDArray position = take(p.position, scope.create(batch.packedPositions), scope);
        NDArray sum = word.add(type);
        word.close();
        type.close();
        NDArray x =
                AttentionOps.addBiasResidualLayerNorm(
                        sum, null, position, p.embNormWeight, p.embNormBias, eps);
        sum.close();
        position.close();
        if (computeDataType != DataType.FLOAT32) {
            NDArray cast = x.toType(computeDataType, false);
            x.close();
            x = cast;
        }
        NDArray cuSeqlens = scope.create(batch.cuSeqlens);
        AttentionOptions options = AttentionOptions.defaults();
        for (Layer layer : p.layers) {
            NDArray qkv = Linear.linear(x, layer.qkvWeight, layer.qkvBias).head(); // [N, 3C]
            NDArray split = qkv.reshape(n, 3, heads, d);
            NDList attended =
                    AttentionOps.flashAttentionVarlen(
                            split.get(new NDIndex(":, 0")),
                            split.get(new NDIndex(":, 1")),
                            split.get(new NDIndex(":, 2")),
                            cuSeqlens,
                            cuSeqlens,
                            batch.maxLen,
                            batch.maxLen,
                            options);
            qkv.close();
            attended.get(1).close();
            NDArray merged = attended.get(0).reshape(n, c);
            NDArray projected = Linear.linear(merged, layer.outWeight, null).head();
            merged.close();
            NDArray x1 =
                    AttentionOps.addBiasResidualLayerNorm(
                            projected,
                            layer.outBias32,
                            x,
                            layer.norm1Weight32,
                            layer.norm1Bias32,
                            eps);
            projected.close();
            x.close();
            NDArray inter = Linear.linear(x1, layer.interWeight, null).head();
            NDArray act = AttentionOps.addBiasGelu(inter, layer.interBias32, false);
            inter.close();
            NDArray out = Linear.linear(act, layer.ffnOutWeight, null).head();
            act.close();
            x =
                    AttentionOps.addBiasResidualLayerNorm(
                            out,
                            layer.ffnOutBias32,
                            x1,
                            layer.norm2Weight32,
                            layer.norm2Bias32,
                            eps);
            out.close();
            x1.close();
        }
        return x;
    }

    /**
     * The stock encoder: DJL NDArray ops on the padded batch, as transformers' eager BertModel.
     *
     * @return {@code (B, S, C)} in the compute dtype
     */
    private NDArray stockEncode(Prepared p, Batch batch, NDManager scope) {
        int b = batch.batch;
        int s = batch.seqLen;
        long c = config.getHiddenSize();
        int heads = config.getNumHeads();
        long d = config.getHeadDim();
        float eps = (float) config.getLayerNormEps();
        Shape norm = new Shape(c);
        NDArray ids = scope.create(batch.ids);
        NDArray types = scope.create(batch.types);
        NDArray word = take(p.word, ids, scope).reshape(b, s, c);
        NDArray type = take(p.type, types, scope).reshape(b, s, c);
        NDArray position = p.position.get(new NDIndex("0:" + s));
        position.attach(scope);
        NDArray x =
                LayerNorm.layerNorm(
                                word.add(type).add(position),
                                norm,
                                p.embNormWeight,
                                p.embNormBias,
                                eps)
                        .head()
                        .toType(computeDataType, false);
        // transformers' extended attention mask: (1 - mask) * finfo(dtype).min on the keys.
        float min = computeDataType == DataType.FLOAT16 ? -65504f : -Float.MAX_VALUE;
        NDArray additive =
                scope.create(batch.mask, new Shape(b, 1, 1, s))
                        .toType(computeDataType, false)
                        .neg()
                        .add(1)
                        .mul(min);
        float scale = (float) (1.0 / Math.sqrt(d));
        for (Layer layer : p.layers) {
            NDArray[] qkv = new NDArray[3];
            for (int i = 0; i < 3; ++i) {
                qkv[i] =
                        Linear.linear(x, layer.stockWeights[i], layer.stockBiases[i])
                                .head()
                                .reshape(b, s, heads, d)
                                .transpose(0, 2, 1, 3);
            }
            NDArray scores = qkv[0].matMul(qkv[1].transpose(0, 1, 3, 2)).mul(scale).add(additive);
            NDArray context =
                    scores.softmax(-1)
                            .matMul(qkv[2])
                            .transpose(0, 2, 1, 3)
                            .reshape(b, s, c);
            NDArray attended = Linear.linear(context, layer.outWeight, layer.outBias).head();
            NDArray x1 =
                    LayerNorm.layerNorm(
                                    attended.add(x), norm, layer.norm1Weight, layer.norm1Bias, eps)
                            .head();
            NDArray inter =
                    Activation.gelu(
                            Linear.linear(x1, layer.interWeight, layer.interBias).head());
            NDArray out = Linear.linear(inter, layer.ffnOutWeight, layer.ffnOutBias).head();
            x = LayerNorm.layerNorm(out.add(x1), norm, layer.norm2Weight, layer.norm2Bias, eps)
                    .head();
            }
        return x;
    }

    /**
     * Mean of each sequence's packed rows without a padded copy: prefix sums over the rows in
     * float64 (exact enough that the differences of two sums lose nothing a float32 mean keeps),
     * then one difference per sequence.
     *
     * @return {@code (B, C)} float32
     */
    private NDArray segmentMean(NDArray rows, Batch batch, NDManager scope) {
        long c = config.getHiddenSize();
        NDArray prefix =
                NDArrays.concat(
                        new NDList(
                                scope.zeros(new Shape(1, c), DataType.FLOAT64),
                                rows.toType(DataType.FLOAT64, false).cumSum(0)),
                        0); // [N + 1, C], row i = sum of rows [0, i)
        int[] cu = batch.cuSeqlens;
        double[] inverse = new double[batch.batch];
        long[] startRows = new long[batch.batch];
        long[] endRows = new long[batch.batch];
        for (int i = 0; i < batch.batch; ++i) {
            inverse[i] = 1.0 / (cu[i + 1] - cu[i]);
            startRows[i] = cu[i];
            endRows[i] = cu[i + 1];
        }
        NDArray ends = prefix.get(scope.create(endRows));
        NDArray starts = prefix.get(scope.create(startRows));
        return ends.sub(starts)
                .mul(scope.create(inverse, new Shape(batch.batch, 1)))
                .toType(DataType.FLOAT32, false);
    }

    /** The first valid token of each row of a padded {@code (B, S, C)} state, float32. */
    private static NDArray firstValid(NDArray hidden, Batch batch, NDManager scope) {
        long[] flat = new long[batch.batch];
        for (int b = 0; b < batch.batch; ++b) {
            flat[b] = batch.flatIndex[batch.cuSeqlens[b]];
        }
        long c = hidden.getShape().get(2);
        return hidden.reshape(-1, c).get(scope.create(flat));
    }

    /** Rows of a weight table, attached to the forward's scope (a gather attaches to the table). */
    private static NDArray take(NDArray table, NDArray index, NDManager scope) {
        NDArray rows = table.get(index);
        rows.attach(scope);
        return rows;
    }

    private static long[] toLongs(NDArray array, String name) {
        DataType type = array.getDataType();
        if (!type.isInteger()) {
            throw new IllegalArgumentException(
                    name + ": expected an integer array (int64 or int32), got " + type);
        }
        if (type == DataType.INT64) {
            return array.toLongArray();
        }
        try (NDArray cast = array.toType(DataType.INT64, false)) {
            return cast.toLongArray();
        }
    }

    /**
     * A batch read to the host once: the inputs checked, and the packing of its valid tokens
     * (row-major), which both paths and the poolings share.
     */
    private static final class Batch {
        int batch;
        int seqLen;
        long[] ids;
        long[] types;
        long[] mask;
        boolean rightPadded = true;
        int tokens;
        int maxLen;
        int[] cuSeqlens;
        /** Flat {@code b * S + t} of each packed token. */
        int[] flatIndex;
        /** Packed row of each flat position, -1 for padding. */
        int[] rowOf;
        long[] packedIds;
        long[] packedTypes;
        long[] packedPositions;

        static Batch of(
                BertEncoderConfig config,
                Device device,
                NDArray inputIds,
                NDArray tokenTypeIds,
                NDArray attentionMask) {
            Objects.requireNonNull(inputIds, "inputIds must not be null");
            Objects.requireNonNull(attentionMask, "attentionMask must not be null");
            Shape shape = inputIds.getShape();
            if (shape.dimension() != 2 || shape.get(0) < 1 || shape.get(1) < 1) {
                throw new IllegalArgumentException(
                        "inputIds: expected (B, S) with B >= 1 and S >= 1, got " + shape);
            }
            for (NDArray a : new NDArray[] {inputIds, tokenTypeIds, attentionMask}) {
                if (a != null && !a.getDevice().equals(device)) {
                    throw new IllegalArgumentException(
                            "inputs on "
                                    + a.getDevice()
                                    + ", but the encoder's weights are on "
                                    + device);
                }
            }
            Batch b = new Batch();
            b.batch = Math.toIntExact(shape.get(0));
            b.seqLen = Math.toIntExact(shape.get(1));
            int max = config.getMaxPositions();
            if (b.seqLen > max) {
                throw new IllegalArgumentException(
                        "inputIds: sequence length "
                                + b.seqLen
                                + " exceeds max_position_embeddings = "
                                + max
                                + " (truncate the input; the translators do)");
            }
            if (!attentionMask.getShape().equals(shape)) {
                throw new IllegalArgumentException(
                        "attentionMask: expected shape " + shape + ", got "
                                + attentionMask.getShape());
            }
            if (tokenTypeIds != null && !tokenTypeIds.getShape().equals(shape)) {
                throw new IllegalArgumentException(
                        "tokenTypeIds: expected shape " + shape + ", got "
                                + tokenTypeIds.getShape());
            }
            b.ids = toLongs(inputIds, "inputIds");
            b.types =
                    tokenTypeIds == null
                            ? new long[b.ids.length]
                            : toLongs(tokenTypeIds, "tokenTypeIds");
            b.mask = toLongs(attentionMask, "attentionMask");
            check(b.ids, config.getVocabSize(), "inputIds", "vocab_size");
            check(b.types, config.getTypeVocabSize(), "tokenTypeIds", "type_vocab_size");
            check(b.mask, 2, "attentionMask", "1 = token, 0 = padding");
            b.cuSeqlens = new int[b.batch + 1];
            b.rowOf = new int[b.ids.length];
            Arrays.fill(b.rowOf, -1);
            int n = 0;
            for (int r = 0; r < b.batch; ++r) {
                int len = 0;
                boolean ended = false;
                for (int t = 0; t < b.seqLen; ++t) {
                    int flat = r * b.seqLen + t;
                    if (b.mask[flat] != 0) {
                        b.rowOf[flat] = n + len;
                        ++len;
                        if (ended) {
                            b.rightPadded = false;
                        }
                    } else {
                        ended = true;
                    }
                }
                if (len == 0) {
                    throw new IllegalArgumentException(
                            "attentionMask: row " + r + " has no token (all zeros)");
                }
                n += len;
                b.cuSeqlens[r + 1] = n;
                b.maxLen = Math.max(b.maxLen, len);
            }
            b.tokens = n;
            b.flatIndex = new int[n];
            b.packedIds = new long[n];
            b.packedTypes = new long[n];
            b.packedPositions = new long[n];
            for (int flat = 0; flat < b.rowOf.length; ++flat) {
                int row = b.rowOf[flat];
                if (row >= 0) {
                    b.flatIndex[row] = flat;
                    b.packedIds[row] = b.ids[flat];
                    b.packedTypes[row] = b.types[flat];
                    // transformers' position ids are the absolute index, whatever the mask.
                    b.packedPositions[row] = flat % b.seqLen;
                }
            }
            return b;
        }

        private static void check(long[] values, long bound, String name, String what) {
            for (int i = 0; i < values.length; ++i) {
                if (values[i] < 0 || values[i] >= bound) {
                    throw new IllegalArgumentException(
                            name
                                    + ": value "
                                    + values[i]
                                    + " at flat index "
                                    + i
                                    + " is outside [0, "
                                    + bound
                                    + ") ("
                                    + what
                                    + ")");
                }
            }
        }
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
         * @param attention FUSED or STOCK
         * @return this builder
         */
        public Builder optAttention(Attention attention) {
            this.attention = attention;
            return this;
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
            if (output == Output.MASKED_LM && !maskedLmHead) {
                throw new IllegalArgumentException(
                        "output MASKED_LM needs the masked-LM head (optMaskedLmHead(true))");
            }
            return new BertEncoder(this);
        }
    }
}
