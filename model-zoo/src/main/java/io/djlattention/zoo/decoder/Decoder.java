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
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.AbstractBlock;
import ai.djl.nn.Parameter;
import ai.djl.training.ParameterStore;
import ai.djl.util.PairList;

import io.djlattention.AttentionOps;
import io.djlattention.AttentionOptions;
import io.djlattention.DecoderLayerOps;
import io.djlattention.PagedAttentionOptions;
import io.djlattention.paged.PagedBatch;
import io.djlattention.paged.PagedKvCache;
import io.djlattention.zoo.hf.TensorSource;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;

/**
 * A decoder-only transformer (LLaMA-style, GPT-2-style or Gemma-2-style, {@link DecoderConfig})
 * with three attention paths over the same weights:
 *
 * <ul>
 *   <li>{@link ContiguousAttention#STOCK}: stock DJL ops over a contiguous, concatenated KV cache —
 *       the reference;
 *   <li>{@link ContiguousAttention#FLASH} (the default): {@code flash_attention} over the same
 *       contiguous cache (prefill and decode);
 *   <li>paged: {@link #forwardPaged} keeps K/V in a {@link PagedKvCache}; on the CPU each layer
 *       is one fused {@code decoder_layer} call ({@link LayerPath#FUSED}, the default); otherwise
 *       (CUDA, a zero-padded cache, or {@link LayerPath#OP_BY_OP}) prefill runs {@code
 *       flash_attention} or {@code paged_prefill_attention} ({@link PrefillAttention}), decode runs
 *       {@code paged_attention}.
 * </ul>
 *
 * <p>As a DJL {@link ai.djl.nn.Block} ({@link #forward}) it follows the protocol of DJL's {@code
 * TextGenerator}: inputs {@code [inputIds (B, S) int64, positionIds (B, S) int64, attentionMask (B,
 * past + S) int64 (optional), k_0, v_0, ..., k_{L-1}, v_{L-1}]} with past keys/values {@code (B,
 * Hkv, past, D)} (absent on the first call); outputs {@code [logits (B, S, V) float32, k_0, v_0,
 * ...]} with the present keys/values {@code (B, Hkv, past + S, D)}. A zero in the attention mask
 * hides that key (left padding). The mask is never read back to decide anything: a call without
 * one sees every key and runs flash attention; a call with one runs the masked stock attention
 * (a caller that knows its batch is unpadded leaves the mask out; {@link CausalLmTranslator}
 * does so for DJL's {@code TextGenerator}). Positions
 * are below {@link DecoderConfig#getMaxPositions()} on every path: GPT-2's position embeddings and
 * LLaMA's rotary table (made once at load) have that many rows, and a step does not read
 * positions back to check them (libtorch's embedding lookup reports an index out of range).
 *
 * <p>The attention of each path is fixed when the decoder is made: {@link
 * #withContiguousAttention} and {@link #withLayerPath} give views that run another over the same
 * weights.
 *
 * <p>Every path applies the configuration's attention options the same way: the score scale, the
 * sliding window of the local layers ({@link DecoderConfig#getWindowLeft}) and the score
 * soft-cap, through {@link AttentionOptions} for {@code flash_attention}, the {@code window_left}
 * and {@code softcap} arguments of {@code paged_attention} and {@code paged_prefill_attention},
 * and a mask and {@code tanh} on the stock path; the final soft-cap bends the logits. A contiguous
 * or paged cache longer than the window keeps every key; the window hides the old ones.
 *
 * <p>Parameters carry Hugging Face names and shapes: LLaMA {@code model.embed_tokens.weight [V,
 * C]}, {@code model.layers.i.self_attn.{q,k,v,o}_proj.weight [out, in]}, {@code
 * model.layers.i.mlp.{gate,up,down}_proj.weight}, {@code model.layers.i.{input,post_attention}_
 * layernorm.weight}, {@code model.norm.weight}, {@code lm_head.weight} (when untied); GPT-2 {@code
 * wte.weight [V, C]}, {@code wpe.weight [P, C]}, {@code h.i.ln_1.{weight,bias}}, {@code
 * h.i.attn.c_attn.{weight [C, 3C], bias [3C]}}, {@code h.i.attn.c_proj.{weight [C, C], bias}},
 * {@code h.i.ln_2.*}, {@code h.i.mlp.c_fc.{weight [C, 4C], bias}}, {@code h.i.mlp.c_proj.{weight
 * [4C, C], bias}}, {@code ln_f.{weight,bias}} (GPT-2's Conv1D stores {@code [in, out]}); Gemma-2
 * LLaMA's names plus {@code model.layers.i.{pre,post}_feedforward_layernorm.weight}, so a
 * Hugging Face checkpoint's tensors load by name through {@link #setWeights}.
 *
 * <p>The paged cache stores the model's head dim whenever the loaded native library's paged
 * kernels take it ({@link PagedKvCache#supportedHeadDims()}, read from the library, not restated
 * here; the current kernels take every head dim up to 256). Against a library that lacks it
 * (older ones took only 64, 80, 96, 128 and 256; stories260K has 8) K/V are stored zero-padded
 * to the next supported one: zeros add nothing to {@code q·k}, and the padded output columns are
 * dropped. {@link #getCacheHeadDim} is the one place that decides.
 *
 * <p>The cache may store FP8 ({@link io.djlattention.paged.KvCacheDtype#FP8_E4M3}): the decoder
 * passes the cache's per-layer scales to every paged operator and otherwise runs unchanged, in
 * the model's data type.
 */
public final class Decoder extends AbstractBlock {

    /** The attention of the contiguous-cache ({@code TextGenerator}) path. */
    public enum ContiguousAttention {
        /** Stock DJL ops, scores materialised, softmax in float32: the reference. */
        STOCK,
        /** {@code flash_attention}, causal, bottom-right aligned. */
        FLASH
    }

    /**
     * How {@link #forwardPaged} runs the layers: one fused {@code decoder_layer} call per layer
     * ({@link io.djlattention.DecoderLayerOps}), or the op-by-op layers, the reference it is
     * tested against.
     */
    public enum LayerPath {
        /**
         * One {@code decoder_layer} call per layer where the step can take it: a cache (CPU or
         * GPU) storing the model's head dim. A zero-padded cache runs {@link #OP_BY_OP}.
         */
        FUSED,
        /** The op-by-op layers: 15-25 operator calls per layer. */
        OP_BY_OP
    }

    /** The attention of a paged prefill step (decode steps always use paged_attention). */
    public enum PrefillAttention {
        /** {@code flash_attention} per sequence when nothing is cached before the chunk. */
        FLASH,
        /** {@code paged_prefill_attention} (chunks, cached prefixes). */
        PAGED
    }

    private final DecoderConfig config;
    /** The decoder whose weights this one reads: itself, or the source of a {@code with...} view. */
    private final Decoder root;
    /** The parameters by name: the root's map, shared by its views. */
    private final Map<String, Parameter> weights;
    private final ContiguousAttention contiguousAttention;
    private final LayerPath layerPath;
    private StepWeights stepWeights; // the root's only
    /** Per layer: causal flash attention with the layer's window, the scale and the soft-cap. */
    private final AttentionOptions[] flashOptions;
    /** The op-by-op layers of the contiguous path and of the paged reference path. */
    private final DecoderLayers opByOp;
    private final ContiguousCachePath contiguous;

    /**
     * Creates a decoder with uninitialised parameters; give them values with {@link #setWeights} or
     * {@link #initializeRandom}.
     *
     * @param config the configuration
     */
    public Decoder(DecoderConfig config) {
        super((byte) 1);
        this.config = config;
        root = this;
        weights = new LinkedHashMap<>();
        contiguousAttention = ContiguousAttention.FLASH;
        layerPath = LayerPath.FUSED;
        opByOp = new DecoderLayers(config);
        flashOptions = new AttentionOptions[config.getNumLayers()];
        for (int l = 0; l < flashOptions.length; ++l) {
            int windowLeft = config.getWindowLeft(l);
            flashOptions[l] =
                    AttentionOptions.builder()
                            .optCausal(true)
                            .optScale((float) config.getAttentionScale())
                            .optWindow(windowLeft, windowLeft < 0 ? -1 : 0)
                            .optSoftcap(config.getAttentionSoftcap())
                            .build();
        }
        contiguous = new ContiguousCachePath(config, opByOp, flashOptions);
        for (String name : parameterShapes(config).keySet()) {
            weights.put(
                    name,
                    addParameter(
                            Parameter.builder()
                                    .setName(name)
                                    .setType(DecoderParameters.typeOf(name))
                                    .optRequiresGrad(false)
                                    .build()));
        }
    }

    /**
     * Returns the Hugging Face name and shape of every parameter of a configuration.
     *
     * @param c the configuration
     * @return name to shape, in model order
     */
    public static Map<String, Shape> parameterShapes(DecoderConfig c) {
        return DecoderParameters.shapes(c);
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
     * @return FLASH (the default) or STOCK
     */
    public ContiguousAttention getContiguousAttention() {
        return contiguousAttention;
    }

    /**
     * Returns a decoder that runs another attention on the contiguous-cache path ({@link
     * #forward}) over this decoder's weights (shared, not copied: it reads whatever weights this
     * decoder holds when it runs; setting weights through either sets them for both).
     *
     * @param attention FLASH (default: the fused kernel) or STOCK (the reference)
     * @return this decoder if the attention is its own, else a view
     */
    public Decoder withContiguousAttention(ContiguousAttention attention) {
        Objects.requireNonNull(attention, "attention must not be null");
        return attention == contiguousAttention ? this : new Decoder(this, attention, layerPath);
    }

    /**
     * Returns how {@link #forwardPaged} runs the layers.
     *
     * @return FUSED (the default) or OP_BY_OP
     */
    public LayerPath getLayerPath() {
        return layerPath;
    }

    /**
     * Returns a decoder that runs the layers of {@link #forwardPaged} another way, over this
     * decoder's weights (shared, as for {@link #withContiguousAttention}).
     *
     * @param path FUSED (default: one operator call per layer where the step can take it) or
     *     OP_BY_OP (the reference)
     * @return this decoder if the path is its own, else a view
     */
    public Decoder withLayerPath(LayerPath path) {
        Objects.requireNonNull(path, "path must not be null");
        return path == layerPath ? this : new Decoder(this, contiguousAttention, path);
    }

    private Decoder(Decoder source, ContiguousAttention attention, LayerPath path) {
        super((byte) 1);
        config = source.config;
        root = source.root;
        weights = source.root.weights;
        contiguousAttention = attention;
        layerPath = path;
        flashOptions = source.flashOptions;
        opByOp = source.opByOp;
        contiguous = source.contiguous;
    }

    /**
     * Whether {@link #forwardPaged} runs this cache's steps through the fused layer: the path is
     * FUSED and the cache stores the model's head dim (no zero padding).
     *
     * @param cache the cache
     * @return true for the fused layer
     */
    public boolean isFused(PagedKvCache cache) {
        return layerPath == LayerPath.FUSED && cache.getHeadDim() == config.getHeadDim();
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
        if (root != this) {
            root.setWeights(manager, tensors);
            return;
        }
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
        Map<String, NDArray> values = new LinkedHashMap<>();
        for (String name : shapes.keySet()) {
            // duplicate() is a deep copy: an array made by NDManager.create(float[]) may wrap a
            // Java direct buffer that only its own PtNDArray keeps alive, and toType to the same
            // type can return a tensor aliasing it.
            NDArray value = byName.get(name).toType(config.getDataType(), false).duplicate();
            value.attach(manager);
            NDScope.unregister(value);
            values.put(name, value);
        }
        Map<String, NDArray> stacked = new LinkedHashMap<>();
        Map<String, List<String>> groups = DecoderParameters.stackedGroups(config);
        for (Map.Entry<String, List<String>> g : groups.entrySet()) {
            stacked.put(g.getKey(), DecoderParameters.stackRows(values, g.getValue()));
        }
        install(values, stacked);
    }

    /**
     * Sets every parameter by reading it from a source straight into its final array: each is
     * allocated once on {@code manager}'s device in the configuration's data type (the {@link
     * DecoderParameters#stackedGroups} as one array each, filled row range by row range) and filled with one copy.
     * Unlike {@link #setWeights(NDManager, Map)}, no weight is ever held twice, so a checkpoint
     * loads in the memory of its weights (docs/design/checkpoint-loading.md).
     *
     * @param manager the manager that owns the parameters
     * @param source the tensors, named as in {@link #parameterShapes} (names not in the model are
     *     never read)
     * @throws IOException if the source lacks a tensor or cannot read it
     * @throws IllegalArgumentException if a tensor's shape is not the parameter's
     */
    public void setWeights(NDManager manager, TensorSource source) throws IOException {
        if (root != this) {
            root.setWeights(manager, source);
            return;
        }
        Map<String, NDArray> stacked = new LinkedHashMap<>();
        Map<String, NDArray> values = ParameterReader.read(config, manager, source, stacked);
        install(values, stacked);
    }

    /** Makes the parameters of {@code values} and the step's weights over them. */
    private void install(Map<String, NDArray> values, Map<String, NDArray> stacked) {
        for (Map.Entry<String, NDArray> e : values.entrySet()) {
            Parameter old = weights.get(e.getKey());
            Parameter fresh =
                    Parameter.builder()
                            .setName(e.getKey())
                            .setType(old.getType())
                            .optRequiresGrad(false)
                            .optArray(e.getValue())
                            .build();
            parameters.put(e.getKey(), fresh);
            weights.put(e.getKey(), fresh);
        }
        synchronized (this) {
            if (stepWeights != null) {
                stepWeights.close();
            }
            stepWeights = new StepWeights(this, stacked);
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
                boolean gain = DecoderParameters.typeOf(e.getKey()) == Parameter.Type.GAMMA;
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
     * Returns the head dim the paged cache stores: the model's if the loaded library's paged
     * kernels support it, else the next supported one (zero padding; {@link
     * PagedKvCache#paddedHeadDim}). The one place that decides whether {@link #forwardPaged} pads.
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
     * @return the builder; add a block count or memory budget, and {@link
     *     PagedKvCache.Builder#optCacheDtype} for an FP8 cache
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
        return contiguous.forward(
                stepWeights(), inputs, contiguousAttention == ContiguousAttention.FLASH);
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
        // Any cache head dim that holds the model's works (the extra columns are zeros); the
        // decoder's own caches take getCacheHeadDim().
        if (cache.getHeadDim() < config.getHeadDim()
                || cache.getNumKvHeads() != config.getNumKvHeads()
                || cache.getNumLayers() != config.getNumLayers()
                || cache.getDataType() != config.getDataType()) {
            throw new IllegalArgumentException(
                    "cache: expected layers "
                            + config.getNumLayers()
                            + ", Hkv "
                            + config.getNumKvHeads()
                            + ", D >= "
                            + config.getHeadDim()
                            + ", "
                            + config.getDataType()
                            + " keys and values (use newCacheBuilder), got layers "
                            + cache.getNumLayers()
                            + ", Hkv "
                            + cache.getNumKvHeads()
                            + ", D "
                            + cache.getHeadDim()
                            + ", "
                            + cache.getDataType());
        }
        if (isFused(cache)) {
            return forwardFused(cache, batch, tokenIds, positions);
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
        int cacheDim = cache.getHeadDim();
        float scale = (float) config.getAttentionScale();
        float softcap = config.getAttentionSoftcap();
        int attnWidth = config.getAttentionSize();

        DecoderLayers.Step step = opByOp.step(stepWeights(), positions, true);
        NDArray x = opByOp.embed(step, tokenIds, positions); // [T, C]
        // A head dim the kernels lack is zero-padded: the zeros are made once per step.
        NDManager m = x.getManager();
        NDArray padQ =
                cacheDim == dim
                        ? null
                        : m.zeros(
                                new Shape(numTokens, config.getNumHeads(), cacheDim - dim),
                                x.getDataType());
        NDArray padKv =
                cacheDim == dim
                        ? null
                        : m.zeros(
                                new Shape(numTokens, config.getNumKvHeads(), cacheDim - dim),
                                x.getDataType());
        for (int l = 0; l < config.getNumLayers(); ++l) {
            int layer = l;
            x =
                    opByOp.layer(
                            step,
                            l,
                            x,
                            qkv -> {
                                NDArray k = padHeadDim(qkv[1], padKv);
                                NDArray v = padHeadDim(qkv[2], padKv);
                                AttentionOps.reshapeAndCache(k, v, cache, layer, batch);
                                NDArray attn;
                                if (flash) {
                                    attn = flashPrefill(qkv, queryLens, flashOptions[layer]);
                                } else {
                                    PagedAttentionOptions pagedOptions =
                                            PagedAttentionOptions.builder()
                                                    .optScale(scale)
                                                    .optWindowLeft(config.getWindowLeft(layer))
                                                    .optSoftcap(softcap)
                                                    .build();
                                    NDArray q = padHeadDim(qkv[0], padQ);
                                    // The batch's tables were checked once when it was built:
                                    // no per-layer device-to-host copy of them.
                                    attn =
                                            decode
                                                    ? AttentionOps.pagedAttention(
                                                            q,
                                                            cache,
                                                            layer,
                                                            batch,
                                                            pagedOptions)
                                                    // The chunks' own k/v as computed (an
                                                    // FP8 cache: unquantised, as vLLM's
                                                    // prefix prefill and decoder_layer).
                                                    : AttentionOps.pagedPrefillAttention(
                                                            q,
                                                            k,
                                                            v,
                                                            cache,
                                                            layer,
                                                            batch,
                                                            pagedOptions);
                                    if (cacheDim != dim) {
                                        attn = attn.get(new NDIndex("..., :{}", dim));
                                    }
                                }
                                return attn.reshape(numTokens, attnWidth);
                            });
        }
        if (decode) {
            return opByOp.logits(step, x, null); // every row is its sequence's last
        }
        long[] last = new long[queryLens.length];
        int end = 0;
        for (int s = 0; s < queryLens.length; ++s) {
            end += queryLens[s];
            last[s] = end - 1;
        }
        return opByOp.logits(step, x, m.create(last));
    }

    /**
     * {@link #forwardPaged} with one {@code decoder_layer} call per layer: embed, the fused layers
     * (each writes its keys and values and attends over the cache, decode and prefill rows alike),
     * the final norm and the head.
     */
    private NDArray forwardFused(
            PagedKvCache cache, PagedBatch batch, NDArray tokenIds, NDArray positions) {
        DecoderLayers.Step step = opByOp.step(stepWeights(), positions, false);
        FusedDecoderWeights fused = step.w.fused();
        if (batch.getMaxContextLen() > config.getMaxPositions()) {
            // The operator reads no index back on a GPU (no per-layer wait): the positions are
            // checked here, once per step, from the batch's host-side lengths (the rotary table
            // has getMaxPositions() rows).
            throw new IllegalArgumentException(
                    "batch: a context of "
                            + batch.getMaxContextLen()
                            + " tokens exceeds the model's "
                            + config.getMaxPositions()
                            + " positions");
        }
        NDArray x = opByOp.embed(step, tokenIds, positions); // [T, C], a fresh array updated in place
        for (int l = 0; l < config.getNumLayers(); ++l) {
            DecoderLayerOps.decoderLayer(
                    x, positions, cache, l, batch, fused.layer(l), fused.options(l));
        }
        // The fused layers add every bias to the stream: GPT-2's final norm has nothing pending.
        NormWeights finalNorm = new NormWeights();
        finalNorm.gain = step.w.finalNorm.gain;
        finalNorm.bias = step.w.finalNorm.bias;
        if (batch.isDecode()) {
            return opByOp.logits(step, x, null, finalNorm);
        }
        int[] queryLens = batch.getQueryLens();
        long[] last = new long[queryLens.length];
        int end = 0;
        for (int s = 0; s < queryLens.length; ++s) {
            end += queryLens[s];
            last[s] = end - 1;
        }
        return opByOp.logits(step, x, x.getManager().create(last), finalNorm);
    }

    /** Causal flash attention per sequence (nothing cached before the chunk). */
    private static NDArray flashPrefill(
            NDArray[] qkv, int[] queryLens, AttentionOptions causal) {
        List<NDArray> outs = new ArrayList<>(queryLens.length);
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

    /** {@code x [T, H, D]} with the zeros {@code pad [T, H, Dc - D]} appended, or x itself. */
    private static NDArray padHeadDim(NDArray x, NDArray pad) {
        return pad == null ? x : x.concat(pad, -1);
    }

    /** The parameters in the order {@link #currentSources} lists their arrays. */
    Iterable<Parameter> parameterList() {
        return weights.values();
    }

    NDArray[] currentSources() {
        NDArray[] current = new NDArray[weights.size()];
        int i = 0;
        for (Parameter p : weights.values()) {
            current[i++] = p.isInitialized() ? p.getArray() : null;
        }
        return current;
    }

    /** The step arrays of the current parameters, made again if one was replaced. */
    synchronized StepWeights stepWeights() {
        if (root != this) {
            return root.stepWeights();
        }
        if (stepWeights == null || !stepWeights.isCurrent()) {
            if (stepWeights != null) {
                stepWeights.close();
            }
            stepWeights = new StepWeights(this, Map.of());
        }
        return stepWeights;
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
