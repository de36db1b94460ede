/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.nn;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Block;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.BatchNorm;
import ai.djl.nn.transformer.PointwiseFeedForwardBlock;
import ai.djl.nn.transformer.ScaledDotProductAttentionBlock;
import ai.djl.nn.transformer.TransformerEncoderBlock;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;
import io.djlattention.AttentionOps;
import java.io.DataInputStream;
import java.io.IOException;
import java.util.List;
import java.util.function.Function;

/**
 * A drop-in replacement for DJL's {@link TransformerEncoderBlock} (the post-norm encoder layer of
 * DJL's BERT) that runs at inference as four GEMMs and four fused kernels: the fused Q/K/V
 * projection, {@code bert_attention}, the output projection with {@code add_bias_residual_affine}
 * (bias + residual + the layer's first BatchNorm folded to a per-channel affine), the first
 * feed-forward GEMM with {@code add_bias_gelu}, and the second with {@code
 * add_bias_residual_affine} (its residual is the layer's original input, as in stock DJL).
 *
 * <p>Same constructor arguments, child names and order ({@code selfAttention}, {@code
 * attentionNorm}, {@code outputBlock}, {@code outputNorm}), version and parameter names and shapes
 * as the stock block, so parameters saved from one load into the other; {@code selfAttention} is a
 * {@link FlashSelfAttentionBlock}.
 *
 * <p>Inputs as the stock block: {@code [x, mask]} or {@code [x]}, {@code x [B, S, E]}, mask as
 * {@link FlashSelfAttentionBlock} takes it; output {@code [B, S, E]}. With a right-padding mask and
 * padding removal on (the default), the valid tokens are packed ({@code remove_padding}), the layer
 * runs on them only and the result is scattered back ({@code restore_padding}): outputs at valid
 * positions equal the stock block's, outputs at padding positions are 0 (stock DJL computes values
 * there that no valid position depends on). With padding removal off, every position is computed
 * and equals the stock output. A training forward, a mask that is not right-padding (causal, a row
 * with no valid key, other values), or dtypes other than float32/float16 run the stock computation
 * unchanged. float16 inputs use float16 copies of the weights and float32 per-channel vectors.
 *
 * <p>The BatchNorm folding ({@code scale = gamma / sqrt(runningVar + 1e-5)}, {@code shift = beta -
 * runningMean * scale}) and the float16 weight copies are derived when first needed and rebuilt
 * when a parameter array is replaced or after a training forward; call {@link
 * #syncFusedParameters()} after changing parameter arrays in place.
 */
public final class FusedTransformerEncoderBlock extends AbstractBlock {

    private static final byte VERSION = 1;
    private static final java.util.Map<String, Boolean> GELU_CHOICE =
            new java.util.concurrent.ConcurrentHashMap<>();

    /** DJL's BatchNorm default, which TransformerEncoderBlock uses. */
    static final float BATCH_NORM_EPS = 1e-5f;

    private final TransformerEncoderBlock stock;
    private final FlashSelfAttentionBlock selfAttention;
    private final BatchNorm attentionNorm;
    private final PointwiseFeedForwardBlock outputBlock;
    private final BatchNorm outputNorm;
    private final Linear hiddenLinear;
    private final Block activation;
    private final Linear outputLinear;
    private boolean paddingFree = true;
    private Boolean activationIsGelu;

    private final DerivedArray attentionScale = new DerivedArray();
    private final DerivedArray attentionShift = new DerivedArray();
    private final DerivedArray outputScale = new DerivedArray();
    private final DerivedArray outputShift = new DerivedArray();
    private final DerivedArray hiddenWeight = new DerivedArray();
    private final DerivedArray hiddenBias = new DerivedArray();
    private final DerivedArray outputWeight = new DerivedArray();
    private final DerivedArray resultBias32 = new DerivedArray();
    private final DerivedArray hiddenBias32 = new DerivedArray();
    private final DerivedArray outputBias32 = new DerivedArray();

    /**
     * Creates an encoder layer, with the stock constructor's arguments.
     *
     * @param embeddingSize the embedding size {@code E}
     * @param headCount the number of attention heads, dividing {@code E}
     * @param hiddenSize the hidden size of the feed-forward block
     * @param dropoutProbability the dropout probability (training only)
     * @param activationFunction the feed-forward activation; DJL's {@code Activation::gelu} (the
     *     erf form) runs fused, any other function runs as given between the fused ops
     */
    public FusedTransformerEncoderBlock(
            int embeddingSize,
            int headCount,
            int hiddenSize,
            float dropoutProbability,
            Function<NDList, NDList> activationFunction) {
        this(
                new TransformerEncoderBlock(
                        embeddingSize,
                        headCount,
                        hiddenSize,
                        dropoutProbability,
                        activationFunction),
                headCount);
    }

    private FusedTransformerEncoderBlock(TransformerEncoderBlock stock, int headCount) {
        super(VERSION);
        this.stock = stock;
        List<Block> children = stock.getChildren().values();
        selfAttention =
                addChildBlock(
                        "selfAttention",
                        FlashSelfAttentionBlock.from(
                                (ScaledDotProductAttentionBlock) children.get(0), headCount));
        attentionNorm = addChildBlock("attentionNorm", (BatchNorm) children.get(1));
        outputBlock = addChildBlock("outputBlock", (PointwiseFeedForwardBlock) children.get(2));
        outputNorm = addChildBlock("outputNorm", (BatchNorm) children.get(3));
        List<Block> layers = outputBlock.getChildren().values();
        if (layers.size() != 3) {
            throw new IllegalArgumentException(
                    "expected a feed-forward block of one hidden layer (Linear, activation,"
                            + " Linear), got "
                            + layers.size()
                            + " blocks");
        }
        hiddenLinear = (Linear) layers.get(0);
        activation = layers.get(1);
        outputLinear = (Linear) layers.get(2);
    }

    /**
     * Wraps a stock encoder layer: the returned block shares its children and parameters (no copy),
     * and gives the stock layer's outputs with the fused kernels.
     *
     * @param stock the stock layer, initialised or not
     * @param headCount the head count the stock layer was built with (DJL 0.36.0 does not expose
     *     it); must divide the embedding size
     * @return a fused layer over the same parameters
     * @throws IllegalArgumentException if {@code headCount} does not divide the embedding size
     */
    public static FusedTransformerEncoderBlock from(TransformerEncoderBlock stock, int headCount) {
        return new FusedTransformerEncoderBlock(stock, headCount);
    }

    /**
     * Sets whether a right-padded batch runs on its valid tokens only (default: yes). Off, every
     * position is computed and the outputs at padding positions equal the stock block's too.
     *
     * @param paddingFree whether to remove padding
     * @return this block
     */
    public FusedTransformerEncoderBlock setPaddingFree(boolean paddingFree) {
        this.paddingFree = paddingFree;
        return this;
    }

    /**
     * Returns whether a right-padded batch runs on its valid tokens only.
     *
     * @return whether padding is removed
     */
    public boolean isPaddingFree() {
        return paddingFree;
    }

    /**
     * Returns the stock layer whose children and parameters this block shares.
     *
     * @return the stock layer
     */
    public TransformerEncoderBlock getStockBlock() {
        return stock;
    }

    /**
     * Returns the self-attention child.
     *
     * @return the self-attention block
     */
    public FlashSelfAttentionBlock getSelfAttentionBlock() {
        return selfAttention;
    }

    /**
     * Rebuilds every derived array (fused Q/K/V weight, folded norms, float16 copies) from the
     * parameters: needed only after parameter arrays were modified in place outside a training
     * forward.
     */
    public void syncFusedParameters() {
        selfAttention.syncFusedParameters();
        for (DerivedArray derived :
                new DerivedArray[] {
                    attentionScale,
                    attentionShift,
                    outputScale,
                    outputShift,
                    hiddenWeight,
                    hiddenBias,
                    outputWeight,
                    resultBias32,
                    hiddenBias32,
                    outputBias32
                }) {
            derived.invalidate();
        }
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        return inputShapes;
    }

    /** {@inheritDoc} */
    @Override
    protected void initializeChildBlocks(
            NDManager manager, DataType dataType, Shape... inputShapes) {
        // Same order of random draws as the stock layer; then the fused attention child records
        // its input shapes (its parameters are the stock ones, already initialised).
        stock.initialize(manager, dataType, inputShapes);
        selfAttention.initialize(manager, dataType, inputShapes);
        syncFusedParameters();
    }

    /** {@inheritDoc} */
    @Override
    public void loadParameters(NDManager manager, DataInputStream is)
            throws IOException, MalformedModelException {
        super.loadParameters(manager, is);
        syncFusedParameters();
    }

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore ps, NDList inputs, boolean training, PairList<String, Object> params) {
        if (training) {
            syncFusedParameters();
            return stock.forward(ps, inputs, true, params);
        }
        NDArray x = inputs.head();
        Shape shape = x.getShape();
        if (inputs.size() > 2
                || shape.dimension() != 3
                || !FlashSelfAttentionBlock.isFusedType(x.getDataType())) {
            return stock.forward(ps, inputs, false, params);
        }
        int batch = (int) shape.get(0);
        int seqLen = (int) shape.get(1);
        long width = shape.get(2);
        int[] lens;
        if (inputs.size() == 2) {
            lens = PaddingMasks.fromAttentionMask(inputs.get(1), batch, seqLen);
            if (lens == null) {
                return stock.forward(ps, inputs, false, params);
            }
        } else {
            lens = new int[batch];
            java.util.Arrays.fill(lens, seqLen);
        }
        try (NDManager scope = NDManager.subManagerOf(x)) {
            scope.tempAttachAll(inputs);
            RaggedBatch ragged =
                    paddingFree
                            ? RaggedBatch.packed(scope, seqLen, lens, false)
                            : RaggedBatch.padded(scope, seqLen, lens);
            NDArray rows;
            if (ragged.isDense()) {
                rows = x.reshape(ragged.rows(), width);
            } else {
                rows = AttentionOps.removePadding(x, ragged.lensArray()).head();
            }
            NDArray out = forwardRows(ps, rows, ragged);
            NDArray result =
                    ragged.isDense()
                            ? out.reshape(batch, seqLen, width)
                            : AttentionOps.restorePadding(out, ragged.cuSeqlensArray(), seqLen);
            return scope.ret(new NDList(result));
        }
    }

    /**
     * The fused layer on rows of a ragged batch.
     *
     * @param rows the layer input {@code [N, E]}, float32 or float16
     * @return the layer output {@code [N, E]}, attached to the manager of {@code rows}
     */
    NDArray forwardRows(ParameterStore ps, NDArray rows, RaggedBatch ragged) {
        Device device = rows.getDevice();
        DataType type = rows.getDataType();
        NDArray merged = selfAttention.attendRows(ps, rows, ragged);
        NDArray wo = selfAttention.resultProjection(ps, device, type).get(0);
        NDArray bo =
                cast(
                        resultBias32,
                        value(ps, selfAttention.getResultProjection(), "bias", device),
                        DataType.FLOAT32);
        NDArray projected = Linear.linear(merged, wo, null).head();
        merged.close();
        NDArray[] norm1 = foldedNorm(ps, attentionNorm, attentionScale, attentionShift, device);
        NDArray attended =
                AttentionOps.addBiasResidualAffine(projected, bo, rows, norm1[0], norm1[1]);
        projected.close();

        NDArray w1 = cast(hiddenWeight, value(ps, hiddenLinear, "weight", device), type);
        NDArray b1 = value(ps, hiddenLinear, "bias", device);
        NDArray hidden;
        if (isGelu(rows.getManager())
                && fusedGeluIsFaster(rows.getManager(), w1.getShape().get(0))) {
            NDArray raw = Linear.linear(attended, w1, null).head();
            hidden = AttentionOps.addBiasGelu(raw, cast(hiddenBias32, b1, DataType.FLOAT32), false);
            raw.close();
        } else {
            NDArray raw = Linear.linear(attended, w1, cast(hiddenBias, b1, type)).head();
            hidden = activation.forward(ps, new NDList(raw), false).head();
            if (hidden != raw) {
                raw.close();
            }
        }
        NDArray w2 = cast(outputWeight, value(ps, outputLinear, "weight", device), type);
        NDArray b2 = cast(outputBias32, value(ps, outputLinear, "bias", device), DataType.FLOAT32);
        NDArray raw2 = Linear.linear(hidden, w2, null).head();
        hidden.close();
        NDArray[] norm2 = foldedNorm(ps, outputNorm, outputScale, outputShift, device);
        NDArray out = AttentionOps.addBiasResidualAffine(raw2, b2, rows, norm2[0], norm2[1]);
        raw2.close();
        attended.close();
        return out;
    }

    private static NDArray value(ParameterStore ps, Block block, String name, Device device) {
        return FlashSelfAttentionBlock.value(ps, block, name, device);
    }

    private static NDArray cast(DerivedArray cache, NDArray source, DataType type) {
        return cache.get(type, a -> FlashSelfAttentionBlock.castTo(a[0], type), source);
    }

    /**
     * BatchNorm at inference as a per-channel affine, in float32: {@code scale = gamma /
     * sqrt(runningVar + eps)}, {@code shift = beta - runningMean * scale}.
     */
    static NDArray[] foldedNorm(
            ParameterStore ps,
            BatchNorm norm,
            DerivedArray scaleCache,
            DerivedArray shiftCache,
            Device device) {
        NDArray gamma = FlashSelfAttentionBlock.value(ps, norm, "gamma", device);
        NDArray beta = FlashSelfAttentionBlock.value(ps, norm, "beta", device);
        NDArray mean = FlashSelfAttentionBlock.value(ps, norm, "runningMean", device);
        NDArray var = FlashSelfAttentionBlock.value(ps, norm, "runningVar", device);
        NDArray scale =
                scaleCache.get(
                        DataType.FLOAT32,
                        a -> {
                            NDArray g = a[0].toType(DataType.FLOAT32, true);
                            NDArray v = a[1].toType(DataType.FLOAT32, true);
                            NDArray s = g.div(v.add(BATCH_NORM_EPS).sqrt());
                            g.close();
                            v.close();
                            return s;
                        },
                        gamma,
                        var);
        NDArray shift =
                shiftCache.get(
                        DataType.FLOAT32,
                        a -> {
                            NDArray b = a[0].toType(DataType.FLOAT32, true);
                            NDArray m = a[1].toType(DataType.FLOAT32, true);
                            NDArray s = b.sub(m.mul(scale));
                            b.close();
                            m.close();
                            return s;
                        },
                        beta,
                        mean,
                        scale);
        return new NDArray[] {scale, shift};
    }

    /**
     * Whether {@code add_bias_gelu} beats libtorch's bias add (inside the GEMM) plus {@code gelu}
     * on this device, timed once per device type and hidden size on a [256, hidden] tile (best of
     * seven each, after one untimed run; the fused kernel must be 20% faster, so that a busy
     * machine does not decide it). On this project's CPU machine the first CPU kernel was 2.6x slower than
     * libtorch's vectorised gelu at [4096, 3072], so the choice is measured rather than assumed;
     * the system property {@code djl.attn.bert.gelu} ({@code fused} or {@code torch}) overrides it.
     */
    private static boolean fusedGeluIsFaster(NDManager manager, long hidden) {
        String choice = System.getProperty("djl.attn.bert.gelu", "auto");
        if ("fused".equals(choice)) {
            return true;
        } else if ("torch".equals(choice)) {
            return false;
        }
        String key = manager.getDevice().getDeviceType() + "/" + hidden;
        return GELU_CHOICE.computeIfAbsent(
                key,
                k -> {
                    try (NDManager probe = manager.newSubManager()) {
                        NDArray x = probe.randomNormal(new Shape(256, hidden));
                        NDArray bias = probe.randomNormal(new Shape(hidden));
                        long fused = Long.MAX_VALUE;
                        long torch = Long.MAX_VALUE;
                        for (int i = 0; i < 8; ++i) {
                            long start = System.nanoTime();
                            AttentionOps.addBiasGelu(x, bias, false).close();
                            long mid = System.nanoTime();
                            NDArray sum = x.add(bias);
                            sum.getNDArrayInternal().gelu().close();
                            sum.close();
                            long end = System.nanoTime();
                            if (i > 0) {
                                fused = Math.min(fused, mid - start);
                                torch = Math.min(torch, end - mid);
                            }
                        }
                        // Ties go to libtorch (what the stock block runs): only a clear win
                        // switches to the fused kernel.
                        return fused < 0.8 * torch;
                    }
                });
    }

    /** Whether the activation is DJL's erf-form GELU: compared once on a probe. */
    private boolean isGelu(NDManager manager) {
        if (activationIsGelu == null) {
            try (NDManager probe = manager.newSubManager()) {
                NDArray x = probe.linspace(-6f, 6f, 97);
                NDArray expected = x.getNDArrayInternal().gelu();
                NDArray got =
                        activation
                                .forward(new ParameterStore(probe, false), new NDList(x), false)
                                .head();
                activationIsGelu =
                        got.getShape().equals(expected.getShape()) && got.contentEquals(expected);
            } catch (RuntimeException e) {
                activationIsGelu = false;
            }
        }
        return activationIsGelu;
    }
}
