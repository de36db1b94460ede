/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDArrays;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.NDScope;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.internal.NDArrayEx;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.ndarray.types.SparseFormat;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Activation;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * A decoder-only transformer (LLaMA-style or GPT-2-style, {@link DecoderConfig}) with three
 * attention paths over the same weights:
 *
 * <ul>
 *   <li>{@link ContiguousAttention#STOCK}: stock DJL ops over a contiguous, concatenated KV cache —
 *       the reference;
 *   <li>{@link ContiguousAttention#FLASH}: {@code flash_attention} over the same contiguous cache
 *       (prefill and decode);
 *   <li>paged: {@link #forwardPaged} keeps K/V in a {@link PagedKvCache}; prefill runs {@code
 *       flash_attention} or {@code paged_prefill_attention} ({@link PrefillAttention}), decode runs
 *       {@code paged_attention}.
 * </ul>
 *
 * <p>As a DJL {@link ai.djl.nn.Block} ({@link #forward}) it follows the protocol of DJL's {@code
 * TextGenerator}: inputs {@code [inputIds (B, S) int64, positionIds (B, S) int64, attentionMask (B,
 * past + S) int64, k_0, v_0, ..., k_{L-1}, v_{L-1}]} with past keys/values {@code (B, Hkv, past,
 * D)} (absent on the first call); outputs {@code [logits (B, S, V) float32, k_0, v_0, ...]} with
 * the present keys/values {@code (B, Hkv, past + S, D)}. A zero in the attention mask hides that
 * key (left padding); the flash path then falls back to the stock ops for that call.
 *
 * <p>Parameters carry Hugging Face names and shapes: LLaMA {@code model.embed_tokens.weight [V,
 * C]}, {@code model.layers.i.self_attn.{q,k,v,o}_proj.weight [out, in]}, {@code
 * model.layers.i.mlp.{gate,up,down}_proj.weight}, {@code model.layers.i.{input,post_attention}_
 * layernorm.weight}, {@code model.norm.weight}, {@code lm_head.weight} (when untied); GPT-2 {@code
 * wte.weight [V, C]}, {@code wpe.weight [P, C]}, {@code h.i.ln_1.{weight,bias}}, {@code
 * h.i.attn.c_attn.{weight [C, 3C], bias [3C]}}, {@code h.i.attn.c_proj.{weight [C, C], bias}},
 * {@code h.i.ln_2.*}, {@code h.i.mlp.c_fc.{weight [C, 4C], bias}}, {@code h.i.mlp.c_proj.{weight
 * [4C, C], bias}}, {@code ln_f.{weight,bias}} (GPT-2's Conv1D stores {@code [in, out]}), so a
 * Hugging Face checkpoint's tensors load by name through {@link #setWeights}.
 *
 * <p>The paged kernels take the head dims {@link PagedKvCache#supportedHeadDims()} lists (the
 * native library's one list); a model with another head dim (stories260K has 8) stores K/V
 * zero-padded to the next supported one ({@link #getCacheHeadDim}):
 * zeros add nothing to {@code q·k} and the padded output columns are dropped.
 */
public final class Decoder extends AbstractBlock {

    /** The attention of the contiguous-cache ({@code TextGenerator}) path. */
    public enum ContiguousAttention {
        /** Stock DJL ops, scores materialised, softmax in float32: the reference. */
        STOCK,
        /** {@code flash_attention}, causal, bottom-right aligned. */
        FLASH
    }

    /** The attention of a paged prefill step (decode steps always use paged_attention). */
    public enum PrefillAttention {
        /** {@code flash_attention} per sequence when nothing is cached before the chunk. */
        FLASH,
        /** {@code paged_prefill_attention} (chunks, cached prefixes). */
        PAGED
    }

    private static final float MASKED = -1e30f;

    private final DecoderConfig config;
    private final Map<String, Parameter> weights = new LinkedHashMap<>();
    private ContiguousAttention contiguousAttention = ContiguousAttention.STOCK;

    /**
     * Creates a decoder with uninitialised parameters; give them values with {@link #setWeights} or
     * {@link #initializeRandom}.
     *
     * @param config the configuration
     */
    public Decoder(DecoderConfig config) {
        super((byte) 1);
        this.config = config;
        for (String name : parameterShapes(config).keySet()) {
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

    private static Parameter.Type typeOf(String name) {
        if (name.endsWith(".bias")) {
            return Parameter.Type.BIAS;
        }
        if (name.contains("ln") || name.contains("norm")) {
            return Parameter.Type.GAMMA;
        }
        return Parameter.Type.WEIGHT;
    }

    /**
     * Returns the Hugging Face name and shape of every parameter of a configuration.
     *
     * @param c the configuration
     * @return name to shape, in model order
     */
    public static Map<String, Shape> parameterShapes(DecoderConfig c) {
        Map<String, Shape> shapes = new LinkedHashMap<>();
        int hidden = c.getHiddenSize();
        int inter = c.getIntermediateSize();
        int kvDim = c.getNumKvHeads() * c.getHeadDim();
        int qDim = c.getAttentionSize();
        if (c.getArchitecture() == DecoderConfig.Architecture.LLAMA) {
            shapes.put("model.embed_tokens.weight", new Shape(c.getVocabSize(), hidden));
            for (int l = 0; l < c.getNumLayers(); ++l) {
                String p = "model.layers." + l + ".";
                shapes.put(p + "input_layernorm.weight", new Shape(hidden));
                shapes.put(p + "self_attn.q_proj.weight", new Shape(qDim, hidden));
                shapes.put(p + "self_attn.k_proj.weight", new Shape(kvDim, hidden));
                shapes.put(p + "self_attn.v_proj.weight", new Shape(kvDim, hidden));
                shapes.put(p + "self_attn.o_proj.weight", new Shape(hidden, qDim));
                shapes.put(p + "post_attention_layernorm.weight", new Shape(hidden));
                shapes.put(p + "mlp.gate_proj.weight", new Shape(inter, hidden));
                shapes.put(p + "mlp.up_proj.weight", new Shape(inter, hidden));
                shapes.put(p + "mlp.down_proj.weight", new Shape(hidden, inter));
            }
            shapes.put("model.norm.weight", new Shape(hidden));
            if (!c.isTieEmbeddings()) {
                shapes.put("lm_head.weight", new Shape(c.getVocabSize(), hidden));
            }
        } else {
            shapes.put("wte.weight", new Shape(c.getVocabSize(), hidden));
            shapes.put("wpe.weight", new Shape(c.getMaxPositions(), hidden));
            for (int l = 0; l < c.getNumLayers(); ++l) {
                String p = "h." + l + ".";
                shapes.put(p + "ln_1.weight", new Shape(hidden));
                shapes.put(p + "ln_1.bias", new Shape(hidden));
                shapes.put(p + "attn.c_attn.weight", new Shape(hidden, 3L * hidden));
                shapes.put(p + "attn.c_attn.bias", new Shape(3L * hidden));
                shapes.put(p + "attn.c_proj.weight", new Shape(hidden, hidden));
                shapes.put(p + "attn.c_proj.bias", new Shape(hidden));
                shapes.put(p + "ln_2.weight", new Shape(hidden));
                shapes.put(p + "ln_2.bias", new Shape(hidden));
                shapes.put(p + "mlp.c_fc.weight", new Shape(hidden, inter));
                shapes.put(p + "mlp.c_fc.bias", new Shape(inter));
                shapes.put(p + "mlp.c_proj.weight", new Shape(inter, hidden));
                shapes.put(p + "mlp.c_proj.bias", new Shape(hidden));
            }
            shapes.put("ln_f.weight", new Shape(hidden));
            shapes.put("ln_f.bias", new Shape(hidden));
            if (!c.isTieEmbeddings()) {
                shapes.put("lm_head.weight", new Shape(c.getVocabSize(), hidden));
            }
        }
        return shapes;
    }

    /**
     * Returns the configuration.
     *
     * @return the configuration
     */
    public DecoderConfig getConfig() {
        return config;
    }

    /**
     * Returns the attention of the contiguous-cache path.
     *
     * @return STOCK or FLASH
     */
    public ContiguousAttention getContiguousAttention() {
        return contiguousAttention;
    }

    /**
     * Chooses the attention of the contiguous-cache path ({@link #forward}).
     *
     * @param attention STOCK (default) or FLASH
     */
    public void setContiguousAttention(ContiguousAttention attention) {
        this.contiguousAttention = attention;
    }

    /**
     * Sets every parameter from tensors named as in {@link #parameterShapes}; each is converted to
     * the configuration's data type and attached to {@code manager}. Names not in the model (for
     * example GPT-2's {@code attn.bias} mask buffers) are ignored; a leading {@code transformer.}
     * is dropped.
     *
     * @param manager the manager that owns the parameters
     * @param tensors the tensors by name
     */
    public void setWeights(NDManager manager, Map<String, NDArray> tensors) {
        Map<String, Shape> shapes = parameterShapes(config);
        Map<String, NDArray> byName = new LinkedHashMap<>();
        for (Map.Entry<String, NDArray> e : tensors.entrySet()) {
            String name =
                    e.getKey().startsWith("transformer.") ? e.getKey().substring(12) : e.getKey();
            byName.put(name, e.getValue());
        }
        for (Map.Entry<String, Shape> e : shapes.entrySet()) {
            NDArray array = byName.get(e.getKey());
            if (array == null) {
                throw new IllegalArgumentException("missing parameter " + e.getKey());
            }
            if (!array.getShape().equals(e.getValue())) {
                throw new IllegalArgumentException(
                        e.getKey()
                                + ": expected shape "
                                + e.getValue()
                                + ", got "
                                + array.getShape());
            }
        }
        for (Map.Entry<String, Shape> e : shapes.entrySet()) {
            // duplicate() is a deep copy: an array made by NDManager.create(float[]) may wrap a
            // Java direct buffer that only its own PtNDArray keeps alive, and toType to the same
            // type can return a tensor aliasing it.
            NDArray value = byName.get(e.getKey()).toType(config.getDataType(), false).duplicate();
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
        }
    }

    /**
     * Sets every parameter to fixed pseudo-random values: weights normal with the given standard
     * deviation, norm gains 1 plus a small normal term, biases small normal — the same values for
     * the same seed on every machine (java.util.Random).
     *
     * @param manager the manager that owns the parameters
     * @param seed the seed
     * @param std the standard deviation of the weights
     */
    public void initializeRandom(NDManager manager, long seed, float std) {
        Random random = new Random(seed);
        Map<String, NDArray> tensors = new LinkedHashMap<>();
        try (NDManager temp = manager.newSubManager()) {
            for (Map.Entry<String, Shape> e : parameterShapes(config).entrySet()) {
                float[] values = new float[Math.toIntExact(e.getValue().size())];
                boolean gain = typeOf(e.getKey()) == Parameter.Type.GAMMA;
                boolean bias = e.getKey().endsWith(".bias");
                for (int i = 0; i < values.length; ++i) {
                    double g = random.nextGaussian();
                    values[i] = (float) (gain ? 1 + 0.1 * g : bias ? 0.02 * g : std * g);
                }
                tensors.put(e.getKey(), temp.create(values, e.getValue()));
            }
            setWeights(manager, tensors);
        }
    }

    /**
     * Returns a parameter's value by its Hugging Face name.
     *
     * @param name the name
     * @return the array
     */
    public NDArray weight(String name) {
        Parameter p = weights.get(name);
        if (p == null) {
            throw new IllegalArgumentException("no parameter " + name);
        }
        return p.getArray();
    }

    /**
     * Returns the head dim the paged cache stores: the model's if the paged kernels support it,
     * else the next supported one (zero padding; {@link PagedKvCache#paddedHeadDim}).
     *
     * @return the cache head dim
     * @throws IllegalArgumentException if the head dim is above every supported one
     */
    public int getCacheHeadDim() {
        return PagedKvCache.paddedHeadDim(config.getHeadDim());
    }

    /**
     * Returns a cache builder with this model's layers, KV heads, cache head dim and data type.
     *
     * @param manager the manager whose device holds the cache
     * @return the builder; add a block count or memory budget
     */
    public PagedKvCache.Builder newCacheBuilder(NDManager manager) {
        return PagedKvCache.builder()
                .setManager(manager)
                .setNumLayers(config.getNumLayers())
                .setNumKvHeads(config.getNumKvHeads())
                .setHeadDim(getCacheHeadDim())
                .optDataType(config.getDataType());
    }

    // ---- the contiguous-cache path (DJL Block, TextGenerator protocol) ----------------------

    /** {@inheritDoc} */
    @Override
    protected NDList forwardInternal(
            ParameterStore parameterStore,
            NDList inputs,
            boolean training,
            PairList<String, Object> params) {
        int layers = config.getNumLayers();
        if (inputs.size() != 3 && inputs.size() != 3 + 2 * layers) {
            throw new IllegalArgumentException(
                    "expected [inputIds, positionIds, attentionMask] plus 0 or "
                            + 2 * layers
                            + " past key/value arrays, got "
                            + inputs.size()
                            + " arrays");
        }
        NDArray inputIds = inputs.get(0);
        NDArray positionIds = inputs.get(1);
        NDArray mask = inputs.get(2);
        long batch = inputIds.getShape().get(0);
        long seq = inputIds.getShape().get(1);
        long past = inputs.size() == 3 ? 0 : inputs.get(3).getShape().get(2);
        if (mask.getShape().get(1) != past + seq) {
            throw new IllegalArgumentException(
                    "attentionMask: expected (B, past + S) = ("
                            + batch
                            + ", "
                            + (past + seq)
                            + "), got "
                            + mask.getShape());
        }
        boolean padded = mask.eq(0).any().getBoolean();
        boolean flash = contiguousAttention == ContiguousAttention.FLASH && !padded;
        NDList presents = new NDList(2 * layers);
        NDArray x = embed(inputIds, positionIds);
        for (int l = 0; l < layers; ++l) {
            NDArray h = norm(x, l, true);
            NDArray[] qkv = qkv(l, h, positionIds); // [B, S, H, D]
            NDArray kNew = qkv[1].transpose(0, 2, 1, 3); // [B, Hkv, S, D]
            NDArray vNew = qkv[2].transpose(0, 2, 1, 3);
            NDArray kAll = past == 0 ? kNew : inputs.get(3 + 2 * l).concat(kNew, 2);
            NDArray vAll = past == 0 ? vNew : inputs.get(4 + 2 * l).concat(vNew, 2);
            presents.add(kAll);
            presents.add(vAll);
            NDArray attn;
            if (flash) {
                attn =
                        AttentionOps.flashAttention(
                                qkv[0],
                                kAll.transpose(0, 2, 1, 3),
                                vAll.transpose(0, 2, 1, 3),
                                AttentionOptions.builder().optCausal(true).build());
            } else {
                attn = stockAttention(qkv[0], kAll, vAll, mask, past);
            }
            x = x.add(outProjection(l, attn.reshape(batch, seq, config.getAttentionSize())));
            x = x.add(mlp(l, norm(x, l, false)));
        }
        NDArray logits = logits(x);
        NDList out = new NDList(1 + 2 * layers);
        out.add(logits);
        out.addAll(presents);
        return out;
    }

    /**
     * Stock DJL attention over a contiguous cache.
     *
     * @param q {@code [B, S, Hq, D]}
     * @param kAll {@code [B, Hkv, L, D]}
     * @param vAll {@code [B, Hkv, L, D]}
     * @param mask {@code [B, L]}, 1 = visible
     * @param past {@code L - S}
     * @return {@code [B, S, Hq, D]}
     */
    private NDArray stockAttention(NDArray q, NDArray kAll, NDArray vAll, NDArray mask, long past) {
        long batch = q.getShape().get(0);
        long seq = q.getShape().get(1);
        long len = kAll.getShape().get(2);
        NDArray k = repeatKv(kAll);
        NDArray v = repeatKv(vAll);
        NDArray qh = q.transpose(0, 2, 1, 3);
        double scale = 1.0 / Math.sqrt(config.getHeadDim());
        NDArray scores = qh.matMul(k.transpose(0, 1, 3, 2)).toType(DataType.FLOAT32, false);
        scores = scores.mul((float) scale);
        NDManager m = q.getManager();
        NDArray keyPos = m.arange(0, (int) len, 1, DataType.INT64).reshape(1, len);
        NDArray queryPos = m.arange(past, past + seq, 1, DataType.INT64).reshape(seq, 1);
        NDArray visible = keyPos.lte(queryPos).reshape(1, 1, seq, len);
        visible = visible.logicalAnd(mask.eq(1).reshape(batch, 1, 1, len));
        NDArray bias = visible.toType(DataType.FLOAT32, false).sub(1f).mul(-MASKED);
        NDArray probs = scores.add(bias).softmax(-1).toType(q.getDataType(), false);
        return probs.matMul(v).transpose(0, 2, 1, 3);
    }

    /** {@code [B, Hkv, L, D]} to {@code [B, Hq, L, D]}: query head h reads KV head h / groups. */
    private NDArray repeatKv(NDArray kv) {
        int groups = config.getNumHeads() / config.getNumKvHeads();
        if (groups == 1) {
            return kv;
        }
        Shape s = kv.getShape();
        return kv.expandDims(2)
                .repeat(2, groups)
                .reshape(s.get(0), s.get(1) * groups, s.get(2), s.get(3));
    }

    // ---- the paged path ---------------------------------------------------------------------

    /**
     * Runs one step over a paged KV cache: embeds the batch's new tokens, writes their keys and
     * values to their slots in every layer and attends through the block tables. A batch where
     * every sequence has one new token is a decode step ({@code paged_attention}); otherwise a
     * prefill step, with {@code prefill} choosing the kernel ({@code flash_attention} needs no
     * cached prefix; a batch with one falls back to {@code paged_prefill_attention}).
     *
     * @param cache the cache; the new tokens' slots were given (allocate / appendSlots)
     * @param batch the step's batch tensors, from {@link PagedKvCache#prepare}
     * @param tokenIds int64 {@code [T]}, the new tokens packed in batch order
     * @param positions int64 {@code [T]}, their positions
     * @param prefill the prefill kernel
     * @return float32 logits {@code [numSeqs, V]} after each sequence's last new token
     */
    public NDArray forwardPaged(
            PagedKvCache cache,
            PagedBatch batch,
            NDArray tokenIds,
            NDArray positions,
            PrefillAttention prefill) {
        int numTokens = batch.getNumTokens();
        if (tokenIds.getShape().dimension() != 1 || tokenIds.size() != numTokens) {
            throw new IllegalArgumentException(
                    "tokenIds: expected [" + numTokens + "], got " + tokenIds.getShape());
        }
        if (cache.getHeadDim() != getCacheHeadDim()
                || cache.getNumKvHeads() != config.getNumKvHeads()
                || cache.getNumLayers() != config.getNumLayers()
                || cache.getDataType() != config.getDataType()) {
            throw new IllegalArgumentException(
                    "cache: expected layers "
                            + config.getNumLayers()
                            + ", Hkv "
                            + config.getNumKvHeads()
                            + ", D "
                            + getCacheHeadDim()
                            + ", "
                            + config.getDataType()
                            + " (use newCacheBuilder)");
        }
        int[] queryLens = batch.getQueryLens();
        int[] contexts = batch.getContextLensHost();
        boolean decode = batch.isDecode();
        boolean hasPrefix = false;
        for (int s = 0; s < queryLens.length; ++s) {
            hasPrefix |= contexts[s] != queryLens[s];
        }
        boolean flash = !decode && prefill == PrefillAttention.FLASH && !hasPrefix;
        int dim = config.getHeadDim();
        int cacheDim = getCacheHeadDim();
        float scale = (float) (1.0 / Math.sqrt(dim));
        int attnWidth = config.getAttentionSize();

        NDArray x = embed(tokenIds, positions); // [T, C]
        for (int l = 0; l < config.getNumLayers(); ++l) {
            NDArray h = norm(x, l, true);
            NDArray[] qkv = qkv(l, h, positions); // [T, H, D]
            cache.write(l, padHeadDim(qkv[1], cacheDim), padHeadDim(qkv[2], cacheDim), batch);
            NDArray attn;
            if (flash) {
                attn = flashPrefill(qkv, queryLens);
            } else {
                NDArray q = padHeadDim(qkv[0], cacheDim);
                if (decode) {
                    // The batch's tables were checked once when it was built: no per-layer
                    // device-to-host copy of them (a synchronisation per layer on a GPU).
                    attn = AttentionOps.pagedAttention(q, cache, l, batch, scale, null);
                } else {
                    attn = AttentionOps.pagedPrefillAttention(q, cache, l, batch, scale, null);
                }
                if (cacheDim != dim) {
                    attn = attn.get(new NDIndex("..., :{}", dim));
                }
            }
            x = x.add(outProjection(l, attn.reshape(numTokens, attnWidth)));
            x = x.add(mlp(l, norm(x, l, false)));
        }
        long[] last = new long[queryLens.length];
        int end = 0;
        for (int s = 0; s < queryLens.length; ++s) {
            end += queryLens[s];
            last[s] = end - 1;
        }
        NDArray rows = x.get(x.getManager().create(last));
        return logits(rows);
    }

    /** Causal flash attention per sequence (nothing cached before the chunk). */
    private NDArray flashPrefill(NDArray[] qkv, int[] queryLens) {
        List<NDArray> outs = new ArrayList<>(queryLens.length);
        AttentionOptions causal = AttentionOptions.builder().optCausal(true).build();
        int start = 0;
        for (int n : queryLens) {
            if (n > 0) {
                NDIndex rows = new NDIndex("{}:{}", start, start + n);
                outs.add(
                        AttentionOps.flashAttention(
                                        qkv[0].get(rows).expandDims(0),
                                        qkv[1].get(rows).expandDims(0),
                                        qkv[2].get(rows).expandDims(0),
                                        causal)
                                .squeeze(0));
            }
            start += n;
        }
        return outs.size() == 1 ? outs.get(0) : NDArrays.concat(new NDList(outs), 0);
    }

    private static NDArray padHeadDim(NDArray x, int cacheDim) {
        Shape s = x.getShape();
        long dim = s.get(s.dimension() - 1);
        if (dim == cacheDim) {
            return x;
        }
        Shape padShape = new Shape(s.get(0), s.get(1), cacheDim - dim);
        return x.concat(x.getManager().zeros(padShape, x.getDataType()), -1);
    }

    // ---- the layers, shared by every path ---------------------------------------------------

    private NDArray embed(NDArray tokenIds, NDArray positions) {
        boolean llama = config.getArchitecture() == DecoderConfig.Architecture.LLAMA;
        NDArray table = weight(llama ? "model.embed_tokens.weight" : "wte.weight");
        NDArrayEx ex = tokenIds.getNDArrayInternal();
        NDArray x = ex.embedding(tokenIds, table, SparseFormat.DENSE).get(0);
        if (!llama) {
            NDArray pos =
                    positions
                            .getNDArrayInternal()
                            .embedding(positions, weight("wpe.weight"), SparseFormat.DENSE)
                            .get(0);
            x = x.add(pos);
        }
        return x;
    }

    /** Pre-attention ({@code first}) or pre-MLP norm of layer {@code l}. */
    private NDArray norm(NDArray x, int l, boolean first) {
        if (config.getArchitecture() == DecoderConfig.Architecture.LLAMA) {
            String name =
                    "model.layers."
                            + l
                            + (first
                                    ? ".input_layernorm.weight"
                                    : ".post_attention_layernorm.weight");
            return rmsNorm(x, weight(name));
        }
        String p = "h." + l + (first ? ".ln_1." : ".ln_2.");
        return layerNorm(x, weight(p + "weight"), weight(p + "bias"));
    }

    // Norms compute in float32; mixing in a float16 gain promotes to float32 and keeps every
    // temporary on x's manager (a weight never comes first, so nothing attaches to the model's).
    private NDArray rmsNorm(NDArray x, NDArray gain) {
        NDArray xf = x.toType(DataType.FLOAT32, false);
        NDArray rms = xf.square().mean(new int[] {-1}, true).add(config.getNormEps()).sqrt();
        NDArray y = xf.div(rms).mul(gain);
        return y.toType(x.getDataType(), false);
    }

    private NDArray layerNorm(NDArray x, NDArray gamma, NDArray beta) {
        NDArray xf = x.toType(DataType.FLOAT32, false);
        NDArray centered = xf.sub(xf.mean(new int[] {-1}, true));
        NDArray var = centered.square().mean(new int[] {-1}, true);
        NDArray y = centered.div(var.add(config.getNormEps()).sqrt()).mul(gamma).add(beta);
        return y.toType(x.getDataType(), false);
    }

    private static NDArray linear(NDArray x, NDArray weightOutIn) {
        return x.getNDArrayInternal().linear(x, weightOutIn, null).get(0);
    }

    /**
     * Projections of layer {@code l} with rotary embeddings applied (LLaMA).
     *
     * @param h normed input {@code [..., C]}
     * @param positions int64 {@code [...]}
     * @return q {@code [..., Hq, D]}, k and v {@code [..., Hkv, D]}
     */
    private NDArray[] qkv(int l, NDArray h, NDArray positions) {
        int dim = config.getHeadDim();
        Shape lead = h.getShape().slice(0, h.getShape().dimension() - 1);
        Shape qShape = lead.addAll(new Shape(config.getNumHeads(), dim));
        Shape kvShape = lead.addAll(new Shape(config.getNumKvHeads(), dim));
        if (config.getArchitecture() == DecoderConfig.Architecture.LLAMA) {
            String p = "model.layers." + l + ".self_attn.";
            NDArray q = linear(h, weight(p + "q_proj.weight")).reshape(qShape);
            NDArray k = linear(h, weight(p + "k_proj.weight")).reshape(kvShape);
            NDArray v = linear(h, weight(p + "v_proj.weight")).reshape(kvShape);
            NDArray[] cosSin = rotary(positions);
            return new NDArray[] {rope(q, cosSin), rope(k, cosSin), v};
        }
        String p = "h." + l + ".attn.c_attn.";
        NDArray fused = h.matMul(weight(p + "weight")).add(weight(p + "bias"));
        NDList parts = fused.split(3, fused.getShape().dimension() - 1);
        return new NDArray[] {
            parts.get(0).reshape(qShape),
            parts.get(1).reshape(kvShape),
            parts.get(2).reshape(kvShape)
        };
    }

    /** cos and sin {@code [..., 1, D/2]} float32 of each position. */
    private NDArray[] rotary(NDArray positions) {
        int half = config.getHeadDim() / 2;
        float[] inv = new float[half];
        for (int i = 0; i < half; ++i) {
            inv[i] = (float) (1.0 / Math.pow(config.getRopeTheta(), 2.0 * i / config.getHeadDim()));
        }
        NDArray angles =
                positions
                        .toType(DataType.FLOAT32, false)
                        .expandDims(-1)
                        .mul(positions.getManager().create(inv));
        angles = angles.expandDims(-2);
        return new NDArray[] {angles.cos(), angles.sin()};
    }

    private NDArray rope(NDArray x, NDArray[] cosSin) {
        NDArray xf = x.toType(DataType.FLOAT32, false);
        Shape s = xf.getShape();
        int d = config.getHeadDim();
        NDArray x0;
        NDArray x1;
        boolean interleaved = config.getRopeStyle() == DecoderConfig.RopeStyle.INTERLEAVED;
        if (interleaved) {
            NDArray pairs = xf.reshape(s.slice(0, s.dimension() - 1).add(d / 2, 2));
            x0 = pairs.get(new NDIndex("..., 0"));
            x1 = pairs.get(new NDIndex("..., 1"));
        } else {
            x0 = xf.get(new NDIndex("..., :{}", d / 2));
            x1 = xf.get(new NDIndex("..., {}:", d / 2));
        }
        NDArray cos = cosSin[0];
        NDArray sin = cosSin[1];
        NDArray o0 = x0.mul(cos).sub(x1.mul(sin));
        NDArray o1 = x0.mul(sin).add(x1.mul(cos));
        NDArray out = interleaved ? o0.stack(o1, -1).reshape(s) : o0.concat(o1, -1);
        return out.toType(x.getDataType(), false);
    }

    private NDArray outProjection(int l, NDArray attn) {
        if (config.getArchitecture() == DecoderConfig.Architecture.LLAMA) {
            return linear(attn, weight("model.layers." + l + ".self_attn.o_proj.weight"));
        }
        String p = "h." + l + ".attn.c_proj.";
        return attn.matMul(weight(p + "weight")).add(weight(p + "bias"));
    }

    private NDArray mlp(int l, NDArray h) {
        if (config.getArchitecture() == DecoderConfig.Architecture.LLAMA) {
            String p = "model.layers." + l + ".mlp.";
            NDArray gate = linear(h, weight(p + "gate_proj.weight"));
            NDArray up = linear(h, weight(p + "up_proj.weight"));
            NDArray act = gate.mul(Activation.sigmoid(gate)).mul(up);
            return linear(act, weight(p + "down_proj.weight"));
        }
        String p = "h." + l + ".mlp.";
        NDArray fc = h.matMul(weight(p + "c_fc.weight")).add(weight(p + "c_fc.bias"));
        return geluTanh(fc).matMul(weight(p + "c_proj.weight")).add(weight(p + "c_proj.bias"));
    }

    /** GPT-2's {@code gelu_new}: {@code 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))}. */
    private static NDArray geluTanh(NDArray x) {
        NDArray inner = x.add(x.pow(3).mul(0.044715f)).mul((float) Math.sqrt(2 / Math.PI));
        return x.mul(0.5f).mul(inner.tanh().add(1f));
    }

    /** Final norm and output projection: float32 {@code [..., V]}. */
    private NDArray logits(NDArray x) {
        boolean llama = config.getArchitecture() == DecoderConfig.Architecture.LLAMA;
        NDArray h =
                llama
                        ? rmsNorm(x, weight("model.norm.weight"))
                        : layerNorm(x, weight("ln_f.weight"), weight("ln_f.bias"));
        String head =
                config.isTieEmbeddings()
                        ? (llama ? "model.embed_tokens.weight" : "wte.weight")
                        : "lm_head.weight";
        return linear(h, weight(head)).toType(DataType.FLOAT32, false);
    }

    /** {@inheritDoc} */
    @Override
    public Shape[] getOutputShapes(Shape[] inputShapes) {
        Shape ids = inputShapes[0];
        List<Shape> out = new ArrayList<>();
        out.add(new Shape(ids.get(0), ids.get(1), config.getVocabSize()));
        long past = inputShapes.length > 3 ? inputShapes[3].get(2) : 0;
        for (int i = 0; i < 2 * config.getNumLayers(); ++i) {
            out.add(
                    new Shape(
                            ids.get(0),
                            config.getNumKvHeads(),
                            past + ids.get(1),
                            config.getHeadDim()));
        }
        return out.toArray(new Shape[0]);
    }
}
