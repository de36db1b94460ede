/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.nn.core.Linear;
import ai.djl.nn.norm.LayerNorm;

import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import io.djlattention.EncoderLayerOps;
import io.djlattention.EncoderLayerWeights;

import java.util.Arrays;

/**
 * {@link BertEncoder}'s three ways through the layers over the same weights: {@code
 * encoder_layer} once per layer (the default on the CPU), the same layer as a dozen fused
 * operators (the tested reference, and the path on CUDA), and stock DJL ops on the padded batch
 * (the baseline).
 */
final class EncoderPasses {

    private final BertEncoderConfig config;
    private final DataType computeDataType;

    EncoderPasses(BertEncoderConfig config, DataType computeDataType) {
        this.config = config;
        this.computeDataType = computeDataType;
    }

    /**
     * The padding-free encoder: {@code encoder_layer} per layer where it has a kernel (the CPU),
     * else (or with {@code opByOp}) each layer as a dozen fused operators.
     *
     * @return the packed last hidden state {@code [N, C]} in the compute dtype, row {@code i} the
     *     {@code i}-th valid token in row-major order
     */
    NDArray packed(EncoderWeights p, EncoderBatch batch, NDManager scope, boolean opByOp) {
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
        if (!opByOp && p.device.getDeviceType().equals(Device.Type.CPU)) {
            // One call per layer, in place on x (a fresh array of this scope).
            float scale = (float) (1.0 / Math.sqrt(d));
            for (EncoderLayerWeights layer : p.fusedLayers()) {
                EncoderLayerOps.encoderLayer(
                        x, cuSeqlens, batch.maxLen, layer, heads, (float) eps, scale, false);
            }
            return x;
        }
        AttentionOptions options = AttentionOptions.defaults();
        for (EncoderWeights.Layer layer : p.layers) {
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
    NDArray stock(EncoderWeights p, EncoderBatch batch, NDManager scope) {
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
        for (EncoderWeights.Layer layer : p.layers) {
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
    NDArray segmentMean(NDArray rows, EncoderBatch batch, NDManager scope) {
        long c = config.getHiddenSize();
        if (batch.batch == 1) {
            // One sentence (the online request): the mean of all rows, 3 operator calls instead
            // of the 12 below, ~0.1 ms of a 1 x 16 request's ~3 ms.
            return rows.toType(DataType.FLOAT64, false)
                    .mean(new int[] {0}, true)
                    .toType(DataType.FLOAT32, false);
        }
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
    static NDArray firstValid(NDArray hidden, EncoderBatch batch, NDManager scope) {
        long[] flat = new long[batch.batch];
        for (int b = 0; b < batch.batch; ++b) {
            flat[b] = batch.flatIndex[batch.cuSeqlens[b]];
        }
        long c = hidden.getShape().get(2);
        return hidden.reshape(-1, c).get(scope.create(flat));
    }

    /** Rows of a weight table, attached to the forward's scope (a gather attaches to the table). */
    static NDArray take(NDArray table, NDArray index, NDManager scope) {
        NDArray rows = table.get(index);
        rows.attach(scope);
        return rows;
    }

    /** Packed rows {@code [N, C]} scattered into the padded batch {@code (B, S, C)}, zeros elsewhere. */
    NDArray padded(NDArray rows, EncoderBatch batch, NDManager scope) {
        long c = config.getHiddenSize();
        if (batch.rightPadded) {
            return AttentionOps.restorePadding(rows, scope.create(batch.cuSeqlens), batch.seqLen);
        }
        // Holes in the mask: gather from the rows plus one zero row.
        NDArray zero = scope.zeros(new Shape(1, c), rows.getDataType());
        NDArray padded = NDArrays.concat(new NDList(rows, zero), 0);
        long[] index = new long[batch.batch * batch.seqLen];
        Arrays.fill(index, batch.tokens);
        for (int i = 0; i < batch.tokens; ++i) {
            index[batch.flatIndex[i]] = i;
        }
        return padded.get(scope.create(index)).reshape(batch.batch, batch.seqLen, c);
    }

    /** The masked-LM head on hidden rows {@code [P, C]}: logits {@code [P, V]} float32. */
    NDArray maskedLmHead(EncoderWeights p, NDArray rows) {
        NDArray x = rows.toType(DataType.FLOAT32, false);
        NDArray h = Activation.gelu(Linear.linear(x, p.headWeight, p.headBias).head());
        h = LayerNorm.layerNorm(
                        h,
                        new Shape(config.getHiddenSize()),
                        p.headNormWeight,
                        p.headNormBias,
                        (float) config.getLayerNormEps())
                .head();
        return Linear.linear(h, p.decoderWeight, p.decoderBias).head();
    }
}
