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

import io.djlattention.EncoderLayerOps;
import io.djlattention.GemmMode;
import io.djlattention.EncoderLayerWeights;
import io.djlattention.zoo.hf.HfCheckpoint;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * The arrays {@link BertEncoder}'s forward passes read, made once from its parameters: the
 * concatenated q|k|v weight, compute-dtype copies, and (on the CPU, made at the first fused call)
 * each layer's weights packed for {@code encoder_layer}'s GEMMs. Closing the manager frees them.
 */
final class EncoderWeights {
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

    final DataType computeDataType;
    private final GemmMode gemm;
    private final Function<String, NDArray> weight;
    private volatile List<EncoderLayerWeights> fusedLayers;

    EncoderWeights(
            NDManager manager,
            Function<String, NDArray> weight,
            BertEncoderConfig config,
            boolean maskedLmHead,
            DataType computeDataType,
            GemmMode gemm) {
        this.manager = manager;
        this.weight = weight;
        this.computeDataType = computeDataType;
        this.gemm = gemm;
        device = manager.getDevice();
        word = weight.apply("embeddings.word_embeddings.weight");
        position = weight.apply("embeddings.position_embeddings.weight");
        type = weight.apply("embeddings.token_type_embeddings.weight");
        embNormWeight = weight.apply("embeddings.LayerNorm.weight");
        embNormBias = weight.apply("embeddings.LayerNorm.bias");
        for (int l = 0; l < config.getNumLayers(); ++l) {
            layers.add(new Layer(this, config, "encoder.layer." + l + "."));
        }
        if (maskedLmHead) {
            headWeight = weight.apply("cls.predictions.transform.dense.weight");
            headBias = weight.apply("cls.predictions.transform.dense.bias");
            headNormWeight = weight.apply("cls.predictions.transform.LayerNorm.weight");
            headNormBias = weight.apply("cls.predictions.transform.LayerNorm.bias");
            decoderWeight =
                    config.isTieWordEmbeddings()
                            ? word
                            : weight.apply("cls.predictions.decoder.weight");
            decoderBias = weight.apply("cls.predictions.bias");
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

    /** The Hugging Face name and shape of every parameter, in model order. */
    static Map<String, Shape> parameterShapes(BertEncoderConfig c, boolean maskedLmHead) {
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
     * Checks that every parameter is among the tensors, with its shape and a float dtype; the
     * message names the source (the checkpoint's weights file) and the tensor.
     */
    static void checkTensors(
            Map<String, NDArray> byName,
            Map<String, Shape> shapes,
            String source,
            HfCheckpoint checkpoint)
            throws MalformedModelException {
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
    }

    /**
     * Each layer's arrays as {@code encoder_layer} reads them, made at the first call and kept:
     * float32 GEMM weights packed for MKL (or rounded to bfloat16 in the bfloat16 mode), other
     * dtypes as they are. CPU only.
     */
    List<EncoderLayerWeights> fusedLayers() {
        List<EncoderLayerWeights> ready = fusedLayers;
        if (ready == null) {
            synchronized (this) {
                ready = fusedLayers;
                if (ready == null) {
                    ready = new ArrayList<>();
                    for (Layer l : layers) {
                        ready.add(
                                new EncoderLayerWeights(
                                        gemmWeight(l.qkvWeight),
                                        l.qkvBias32,
                                        gemmWeight(l.outWeight),
                                        l.outBias32,
                                        l.norm1Weight32,
                                        l.norm1Bias32,
                                        gemmWeight(l.interWeight),
                                        l.interBias32,
                                        gemmWeight(l.ffnOutWeight),
                                        l.ffnOutBias32,
                                        l.norm2Weight32,
                                        l.norm2Bias32));
                    }
                    fusedLayers = ready;
                }
            }
        }
        return ready;
    }

    /** A GEMM weight in the form encoder_layer multiplies fastest. */
    private NDArray gemmWeight(NDArray w) {
        if (computeDataType != DataType.FLOAT32) {
            return w;
        }
        return own(EncoderLayerOps.packWeight(w, gemm));
    }

    /** One encoder layer's arrays: GEMM weights in the compute dtype, epilogue vectors float32. */
    static final class Layer {
        /** Concatenated query, key, value weight {@code [3C, C]} and bias {@code [3C]}. */
        final NDArray qkvWeight;
        final NDArray qkvBias;
        /** The q|k|v bias in float32 (the fused layer's epilogue reads float32 vectors). */
        final NDArray qkvBias32;
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

        Layer(EncoderWeights p, BertEncoderConfig config, String prefix) {
            String self = prefix + "attention.self.";
            NDArray w =
                    NDArrays.concat(
                            new NDList(
                                    p.weight.apply(self + "query.weight"),
                                    p.weight.apply(self + "key.weight"),
                                    p.weight.apply(self + "value.weight")),
                            0);
            NDArray b =
                    NDArrays.concat(
                            new NDList(
                                    p.weight.apply(self + "query.bias"),
                                    p.weight.apply(self + "key.bias"),
                                    p.weight.apply(self + "value.bias")),
                            0);
            qkvWeight = p.own(w.toType(p.computeDataType, false));
            qkvBias = p.own(b.toType(p.computeDataType, false));
            qkvBias32 = qkvBias == b ? qkvBias : p.own(b.duplicate());
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
            outWeight = p.compute(p.weight.apply(prefix + "attention.output.dense.weight"));
            outBias32 = p.weight.apply(prefix + "attention.output.dense.bias");
            outBias = p.compute(outBias32);
            norm1Weight32 = p.weight.apply(prefix + "attention.output.LayerNorm.weight");
            norm1Bias32 = p.weight.apply(prefix + "attention.output.LayerNorm.bias");
            norm1Weight = p.compute(norm1Weight32);
            norm1Bias = p.compute(norm1Bias32);
            interWeight = p.compute(p.weight.apply(prefix + "intermediate.dense.weight"));
            interBias32 = p.weight.apply(prefix + "intermediate.dense.bias");
            interBias = p.compute(interBias32);
            ffnOutWeight = p.compute(p.weight.apply(prefix + "output.dense.weight"));
            ffnOutBias32 = p.weight.apply(prefix + "output.dense.bias");
            ffnOutBias = p.compute(ffnOutBias32);
            norm2Weight32 = p.weight.apply(prefix + "output.LayerNorm.weight");
            norm2Bias32 = p.weight.apply(prefix + "output.LayerNorm.bias");
            norm2Weight = p.compute(norm2Weight32);
            norm2Bias = p.compute(norm2Bias32);
        }
    }
}
