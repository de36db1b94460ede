/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonParser;

import io.djlattention.zoo.hf.CheckpointWeights;
import io.djlattention.zoo.hf.HfCheckpoint;
import io.djlattention.zoo.hf.SafetensorsFile;
import io.djlattention.zoo.hf.TensorSource;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads a Hugging Face decoder checkpoint ({@code config.json} + safetensors weights, as {@code
 * save_pretrained} writes them) into a {@link Decoder}.
 *
 * <p>Supported architectures and the {@code config.json} keys read (an absent key takes the
 * default of transformers' config class):
 *
 * <ul>
 *   <li>{@code LlamaForCausalLM}: {@code vocab_size}, {@code hidden_size}, {@code
 *       intermediate_size}, {@code num_hidden_layers}, {@code num_attention_heads}, {@code
 *       num_key_value_heads} (grouped-query attention; default the heads), {@code head_dim}
 *       (default {@code hidden_size / num_attention_heads}), {@code max_position_embeddings}
 *       (default 2048), {@code rms_norm_eps} (default 1e-6), the RoPE base from {@code
 *       rope_parameters.rope_theta} (transformers 5) or {@code rope_theta} (earlier; default
 *       10000), {@code tie_word_embeddings} (default false), {@code hidden_act} ({@code silu}).
 *       RoPE pairs {@code (i, i + D/2)} ({@code rotate_half}).
 *   <li>{@code MistralForCausalLM}: LLaMA's keys (default {@code max_position_embeddings}
 *       131072) and {@code sliding_window} W (default 4096; null: none): on every layer a query
 *       sees itself and the W - 1 keys before it, as transformers' mask {@code kv > q - W} (window
 *       left {@code W - 1} for the attention operators). {@code layer_types} is ignored, as
 *       transformers' Mistral ignores it.
 *   <li>{@code Gemma2ForCausalLM}: LLaMA's keys (defaults {@code head_dim} 256, {@code
 *       max_position_embeddings} 8192, {@code tie_word_embeddings} true) and {@code
 *       hidden_activation} ({@code gelu_pytorch_tanh}: GeGLU MLP), {@code query_pre_attn_scalar}
 *       (default 256; the scores are scaled by its {@code -1/2} power), {@code
 *       attn_logit_softcapping} (default 50) and {@code final_logit_softcapping} (default 30; null:
 *       none), {@code sliding_window} (default 4096; null refused, as transformers does) on the
 *       layers {@code layer_types} marks {@code sliding_attention} (absent: the even layers,
 *       Gemma2Config's rule; the others {@code full_attention}). The norms are {@code x·(1 + w)}, four per layer ({@code input},
 *       {@code post_attention}, {@code pre_feedforward}, {@code post_feedforward}), and the
 *       embeddings are scaled by {@code sqrt(hidden_size)} in the model's dtype.
 *   <li>{@code GPT2LMHeadModel}: {@code vocab_size}, {@code n_embd}, {@code n_layer}, {@code
 *       n_head}, {@code n_positions}, {@code n_inner} (null: {@code 4 n_embd}), {@code
 *       layer_norm_epsilon} (default 1e-5), {@code activation_function} ({@code gelu_new} or {@code
 *       gelu_pytorch_tanh}), {@code tie_word_embeddings} (default true). Tensor names may carry the
 *       {@code transformer.} prefix; the {@code attn.bias} / {@code attn.masked_bias} mask buffers
 *       are ignored.
 * </ul>
 *
 * <p>Refused, with an error naming {@code config.json} and the key: attention or MLP biases
 * ({@code attention_bias}, {@code mlp_bias}), RoPE scaling other than Llama-3's ({@code
 * rope_type: llama3}, read from {@code rope_parameters} or {@code rope_scaling}; linear, dynamic,
 * YaRN and the rest are refused), a partial rotary factor, {@code
 * sliding_window} in a {@code LlamaForCausalLM} (transformers' LLaMA ignores it: such a checkpoint
 * is a Mistral), Gemma-2's bidirectional attention ({@code use_bidirectional_attention}), a
 * {@code layer_types} entry other than {@code sliding_attention} / {@code full_attention} or a
 * list of another length, a window below 1, a soft-cap that is not positive, another activation;
 * GPT-2 variants with unscaled or layer-scaled attention or cross-attention. Weights may be
 * float32, float16 or bfloat16 (F32, F16, BF16); each is converted once, while it is read, to the
 * decoder's data type, float32 or float16 (DJL 0.36.0's PyTorch engine cannot hold bfloat16
 * arrays), with libtorch's rounding.
 */
public final class HfDecoderLoader {

    /** The architectures this loader reads. */
    public static final List<String> ARCHITECTURES =
            List.of(
                    "LlamaForCausalLM",
                    "MistralForCausalLM",
                    "Gemma2ForCausalLM",
                    "GPT2LMHeadModel");

    /** The safetensors dtypes weights may be stored in. */
    private static final List<String> FLOAT_DTYPES = List.of("F32", "F16", "BF16");

    private HfDecoderLoader() {}

    /**
     * Returns whether a checkpoint's architecture is one this loader reads.
     *
     * @param checkpoint the checkpoint
     * @return true for the {@link #ARCHITECTURES}
     */
    public static boolean supports(HfCheckpoint checkpoint) {
        return ARCHITECTURES.contains(checkpoint.getArchitecture());
    }

    /**
     * Reads {@code config.json} as a decoder configuration.
     *
     * @param checkpoint the checkpoint
     * @param dataType the decoder's data type (float32 or float16)
     * @return the configuration
     * @throws MalformedModelException if the architecture or a key is not supported, naming {@code
     *     config.json} and the key
     */
    public static DecoderConfig readConfig(HfCheckpoint checkpoint, DataType dataType)
            throws MalformedModelException {
        Keys k = new Keys(checkpoint);
        String arch = checkpoint.getArchitecture();
        DecoderConfig.Builder b = DecoderConfig.builder().optDataType(dataType);
        boolean llama = "LlamaForCausalLM".equals(arch);
        boolean mistral = "MistralForCausalLM".equals(arch);
        boolean gemma2 = "Gemma2ForCausalLM".equals(arch);
        if (llama || mistral || gemma2) {
            // Defaults are those of transformers' LlamaConfig, MistralConfig and Gemma2Config.
            int hidden = k.requireInt("hidden_size");
            int heads = k.requireInt("num_attention_heads");
            int layers = k.requireInt("num_hidden_layers");
            b.setArchitecture(
                            gemma2
                                    ? DecoderConfig.Architecture.GEMMA2
                                    : DecoderConfig.Architecture.LLAMA)
                    .setVocabSize(k.requireInt("vocab_size"))
                    .setHiddenSize(hidden)
                    .setIntermediateSize(k.requireInt("intermediate_size"))
                    .setNumLayers(layers)
                    .setNumHeads(heads)
                    .optNumKvHeads(k.optInt("num_key_value_heads", heads))
                    .optMaxPositions(
                            k.optInt(
                                    "max_position_embeddings",
                                    gemma2 ? 8192 : mistral ? 4096 * 32 : 2048))
                    .optNormEps((float) k.optDouble("rms_norm_eps", 1e-6))
                    .optRopeTheta(llamaRopeTheta(k))
                    .optRopeStyle(DecoderConfig.RopeStyle.HALF)
                    .optTieEmbeddings(k.optBoolean("tie_word_embeddings", gemma2));
            llama3RopeScaling(k, b);
            int headDim = k.optInt("head_dim", gemma2 ? 256 : 0);
            if (headDim != 0 && headDim * heads != hidden) {
                b.optHeadDim(headDim);
            }
            k.refuseTrue("attention_bias", "attention projections with biases");
            k.refuseTrue("mlp_bias", "MLP projections with biases");
            if (llama) {
                // transformers' LLaMA ignores the key; a LLaMA config that sets it is likely a
                // mislabelled Mistral, whose outputs would silently differ.
                k.refusePresent(
                        "sliding_window",
                        "sliding-window attention in a LlamaForCausalLM (transformers' LLaMA"
                                + " ignores it; a windowed checkpoint is a MistralForCausalLM)");
            }
            if (gemma2) {
                readGemma2(k, b, layers);
            } else {
                // Mistral: every layer windowed; transformers' Mistral ignores layer_types.
                b.optSlidingWindow(mistral ? k.optWindow("sliding_window", 4096) : 0);
                String act = k.optString("hidden_act", "silu");
                if (!"silu".equals(act)) {
                    throw k.refuse("hidden_act", act, "only silu (SwiGLU) is supported");
                }
            }
        } else if ("GPT2LMHeadModel".equals(arch)) {
            int hidden = k.requireInt("n_embd");
            b.setArchitecture(DecoderConfig.Architecture.GPT2)
                    .setVocabSize(k.requireInt("vocab_size"))
                    .setHiddenSize(hidden)
                    .setIntermediateSize(k.optInt("n_inner", 4 * hidden))
                    .setNumLayers(k.requireInt("n_layer"))
                    .setNumHeads(k.requireInt("n_head"))
                    .optMaxPositions(k.requireInt("n_positions"))
                    .optNormEps((float) k.optDouble("layer_norm_epsilon", 1e-5))
                    .optTieEmbeddings(k.optBoolean("tie_word_embeddings", true));
            String act = k.optString("activation_function", "gelu_new");
            if (!"gelu_new".equals(act) && !"gelu_pytorch_tanh".equals(act)) {
                throw k.refuse(
                        "activation_function",
                        act,
                        "only gelu_new and gelu_pytorch_tanh (the tanh GELU) are supported");
            }
            if (!k.optBoolean("scale_attn_weights", true)) {
                throw k.refuse("scale_attn_weights", "false", "unscaled attention");
            }
            k.refuseTrue("scale_attn_by_inverse_layer_idx", "layer-scaled attention");
            k.refuseTrue("add_cross_attention", "cross-attention");
        } else {
            throw new MalformedModelException(
                    k.file
                            + ": architecture '"
                            + arch
                            + "' is not a supported decoder (supported: "
                            + String.join(", ", ARCHITECTURES)
                            + ")");
        }
        try {
            return b.build();
        } catch (IllegalArgumentException e) {
            throw new MalformedModelException(k.file + ": " + e.getMessage(), e);
        }
    }

    /** Gemma-2's keys beyond LLaMA's layout. */
    private static void readGemma2(Keys k, DecoderConfig.Builder b, int layers)
            throws MalformedModelException {
        String act = k.optString("hidden_activation", "gelu_pytorch_tanh");
        if (!"gelu_pytorch_tanh".equals(act)) {
            throw k.refuse(
                    "hidden_activation",
                    act,
                    "only gelu_pytorch_tanh (the tanh GELU) is supported");
        }
        k.refuseTrue("use_bidirectional_attention", "bidirectional attention");
        double scalar = k.optDouble("query_pre_attn_scalar", 256);
        if (!(scalar > 0) || Double.isInfinite(scalar)) {
            throw k.refuse(
                    "query_pre_attn_scalar", String.valueOf(scalar), "expected a positive number");
        }
        b.optAttentionScale(1.0 / Math.sqrt(scalar))
                .optAttentionSoftcap(k.optCap("attn_logit_softcapping", 50f))
                .optFinalSoftcap(k.optCap("final_logit_softcapping", 30f))
                .optSlidingWindow(k.optWindow("sliding_window", 4096));
        if (k.config.has("sliding_window") && k.get("sliding_window") == null) {
            // Gemma2Model always builds its sliding-window mask: transformers refuses null too.
            throw k.refuse(
                    "sliding_window", "null", "Gemma-2's local layers need a window >= 1");
        }
        boolean[] sliding = new boolean[layers];
        JsonElement types = k.config.get("layer_types");
        if (types == null || types.isJsonNull()) {
            // Gemma2Config's rule when layer_types is absent: even layers local, odd global.
            for (int l = 0; l < layers; ++l) {
                sliding[l] = l % 2 == 0;
            }
        } else {
            if (!types.isJsonArray() || types.getAsJsonArray().size() != layers) {
                throw k.refuse(
                        "layer_types",
                        types.toString(),
                        "expected one entry per layer (num_hidden_layers " + layers + ")");
            }
            JsonArray list = types.getAsJsonArray();
            for (int l = 0; l < layers; ++l) {
                JsonElement t = list.get(l);
                String type = t.isJsonPrimitive() ? t.getAsString() : t.toString();
                if (!"sliding_attention".equals(type) && !"full_attention".equals(type)) {
                    throw k.refuse(
                            "layer_types[" + l + "]",
                            type,
                            "expected sliding_attention or full_attention");
                }
                sliding[l] = "sliding_attention".equals(type);
            }
        }
        b.optSlidingLayers(sliding);
    }

    private static double llamaRopeTheta(Keys k) throws MalformedModelException {
        JsonElement params = k.config.get("rope_parameters");
        if (params != null && params.isJsonObject()) {
            JsonObject p = params.getAsJsonObject();
            checkRopeType(k, p, "rope_parameters");
            JsonElement factor = p.get("partial_rotary_factor");
            boolean full =
                    factor == null
                            || factor.isJsonNull()
                            || factor.isJsonPrimitive()
                                    && factor.getAsJsonPrimitive().isNumber()
                                    && factor.getAsDouble() == 1.0;
            if (!full) {
                throw k.refuse(
                        "rope_parameters.partial_rotary_factor",
                        factor.toString(),
                        "only full-width RoPE is supported");
            }
            JsonElement theta = p.get("rope_theta");
            if (theta != null && !theta.isJsonNull()) {
                try {
                    return theta.getAsDouble();
                } catch (RuntimeException bad) {
                    throw k.refuse(
                            "rope_parameters.rope_theta", theta.toString(), "expected a number");
                }
            }
        }
        JsonElement scaling = k.config.get("rope_scaling");
        if (scaling != null && !scaling.isJsonNull()) {
            if (!scaling.isJsonObject()) {
                throw k.refuse("rope_scaling", scaling.toString(), "expected null or an object");
            }
            checkRopeType(k, scaling.getAsJsonObject(), "rope_scaling");
        }
        return k.optDouble("rope_theta", 10000.0);
    }

    private static void checkRopeType(Keys k, JsonObject p, String key)
            throws MalformedModelException {
        for (String typeKey : new String[] {"rope_type", "type"}) {
            JsonElement type = p.get(typeKey);
            if (type != null
                    && !type.isJsonNull()
                    && !(type.isJsonPrimitive()
                            && ("default".equals(type.getAsString())
                                    || "llama3".equals(type.getAsString())))) {
                throw k.refuse(
                        key + "." + typeKey,
                        type.isJsonPrimitive() ? type.getAsString() : type.toString(),
                        "only the default RoPE and Llama-3's scaling (llama3) are supported");
            }
        }
    }

    /**
     * Llama-3's rope scaling from {@code rope_parameters} (transformers 5) or {@code rope_scaling}
     * (earlier): {@code rope_type} (or {@code type}) {@code llama3} with {@code factor}, {@code
     * low_freq_factor}, {@code high_freq_factor} and {@code original_max_position_embeddings}.
     */
    private static void llama3RopeScaling(Keys k, DecoderConfig.Builder b)
            throws MalformedModelException {
        for (String key : new String[] {"rope_parameters", "rope_scaling"}) {
            JsonElement e = k.config.get(key);
            if (e == null || !e.isJsonObject()) {
                continue;
            }
            JsonObject p = e.getAsJsonObject();
            JsonElement type = p.has("rope_type") ? p.get("rope_type") : p.get("type");
            if (type == null || !type.isJsonPrimitive() || !"llama3".equals(type.getAsString())) {
                continue;
            }
            double[] v = new double[4];
            String[] names = {
                "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"
            };
            for (int i = 0; i < names.length; ++i) {
                JsonElement x = p.get(names[i]);
                if (x == null || !x.isJsonPrimitive() || !x.getAsJsonPrimitive().isNumber()) {
                    throw k.refuse(
                            key + "." + names[i],
                            String.valueOf(x),
                            "Llama-3 rope scaling needs a number");
                }
                v[i] = x.getAsDouble();
            }
            try {
                b.optLlama3RopeScaling(v[0], v[1], v[2], (int) v[3]);
            } catch (IllegalArgumentException bad) {
                throw k.refuse(key, p.toString(), bad.getMessage());
            }
            return;
        }
    }

    /**
     * Loads the checkpoint's weights into a decoder. Each tensor the model uses is read once,
     * straight from the safetensors file into its parameter on {@code manager}'s device and in
     * {@code dataType} ({@link Decoder#setWeights(NDManager, TensorSource)}): a load holds the
     * weights once, never a second copy (peak host memory: the weights in {@code dataType} on the
     * CPU, a few MB of staging on a GPU). Tensors the model does not use (a tied {@code
     * lm_head.weight}, GPT-2's mask buffers) are never read.
     *
     * @param checkpoint the checkpoint
     * @param manager the manager that owns the parameters (its device is the decoder's)
     * @param dataType float32 or float16
     * @return the decoder
     * @throws MalformedModelException if the configuration is not supported, or a tensor is
     *     missing, has the wrong shape or an unsupported dtype (naming the weights file and the
     *     tensor)
     * @throws IOException if a weights file is missing or cannot be read
     */
    public static Decoder load(HfCheckpoint checkpoint, NDManager manager, DataType dataType)
            throws MalformedModelException, IOException {
        DecoderConfig config = readConfig(checkpoint, dataType);
        Decoder decoder = new Decoder(config);
        boolean gpt2 = config.getArchitecture() == DecoderConfig.Architecture.GPT2;
        try (CheckpointWeights weights = checkpoint.openWeights()) {
            // Every name and shape is checked against the header before anything is read.
            Map<String, String> stored = new LinkedHashMap<>();
            for (Map.Entry<String, Shape> e : Decoder.parameterShapes(config).entrySet()) {
                String name = e.getKey();
                String file = name;
                if (gpt2 && !weights.contains(name) && !name.startsWith("lm_head")) {
                    file = "transformer." + name;
                }
                SafetensorsFile.Entry entry;
                try {
                    entry = weights.entry(file);
                } catch (IOException missing) {
                    throw new MalformedModelException(missing.getMessage(), missing);
                }
                if (!entry.getShape().equals(e.getValue())) {
                    throw new MalformedModelException(
                            checkpoint.getWeightsFile()
                                    + ": tensor "
                                    + file
                                    + " has shape "
                                    + entry.getShape()
                                    + ", config.json implies "
                                    + e.getValue());
                }
                if (!FLOAT_DTYPES.contains(entry.getDtype())) {
                    throw new MalformedModelException(
                            checkpoint.getWeightsFile()
                                    + ": tensor "
                                    + file
                                    + " has dtype "
                                    + entry.getDtype()
                                    + ", expected one of "
                                    + FLOAT_DTYPES);
                }
                stored.put(name, file);
            }
            decoder.setWeights(
                    manager,
                    new TensorSource() {
                        @Override
                        public Shape shape(String name) throws IOException {
                            return weights.shape(stored.get(name));
                        }

                        @Override
                        public void readInto(String name, NDArray destination)
                                throws IOException {
                            weights.readInto(stored.get(name), destination);
                        }
                    });
        }
        return decoder;
    }

    /**
     * Returns the end-of-sequence token: {@code eos_token_id} of {@code generation_config.json}
     * when present, else of {@code config.json}; the first one of a list. An id outside the
     * vocabulary (GPT-2's 50256 in a smaller vocabulary) can never be generated and counts as
     * none.
     *
     * @param checkpoint the checkpoint
     * @param vocabSize the vocabulary size
     * @return the id, or -1 for none
     * @throws IOException if {@code generation_config.json} exists but is malformed
     */
    public static long eosTokenId(HfCheckpoint checkpoint, int vocabSize) throws IOException {
        JsonElement eos = null;
        Path gen = checkpoint.getDirectory().resolve("generation_config.json");
        if (Files.isRegularFile(gen)) {
            try {
                JsonElement g = JsonParser.parseString(Files.readString(gen, StandardCharsets.UTF_8));
                if (g.isJsonObject()) {
                    eos = g.getAsJsonObject().get("eos_token_id");
                }
            } catch (JsonParseException e) {
                throw new IOException(gen + ": malformed JSON: " + e.getMessage(), e);
            }
        }
        if (eos == null || eos.isJsonNull()) {
            eos = checkpoint.getConfig().get("eos_token_id");
        }
        if (eos != null && eos.isJsonArray()) {
            eos = eos.getAsJsonArray().isEmpty() ? null : eos.getAsJsonArray().get(0);
        }
        if (eos == null || eos.isJsonNull() || !eos.isJsonPrimitive()) {
            return -1;
        }
        long id = eos.getAsLong();
        return id >= 0 && id < vocabSize ? id : -1;
    }

    /** Typed access to {@code config.json} with errors naming the file and the key. */
    private static final class Keys {
        final JsonObject config;
        final Path file;

        Keys(HfCheckpoint checkpoint) {
            this.config = checkpoint.getConfig();
            this.file = checkpoint.getDirectory().resolve("config.json");
        }

        private JsonElement get(String key) {
            JsonElement e = config.get(key);
            return e == null || e.isJsonNull() ? null : e;
        }

        int requireInt(String key) throws MalformedModelException {
            JsonElement e = get(key);
            if (e == null) {
                throw new MalformedModelException(file + ": missing key " + key);
            }
            return asInt(key, e);
        }

        int optInt(String key, int fallback) throws MalformedModelException {
            JsonElement e = get(key);
            return e == null ? fallback : asInt(key, e);
        }

        private int asInt(String key, JsonElement e) throws MalformedModelException {
            try {
                return e.getAsInt();
            } catch (RuntimeException bad) {
                throw new MalformedModelException(
                        file + ": " + key + ": expected an integer, got " + e);
            }
        }

        double optDouble(String key, double fallback) throws MalformedModelException {
            JsonElement e = get(key);
            try {
                return e == null ? fallback : e.getAsDouble();
            } catch (RuntimeException bad) {
                throw new MalformedModelException(
                        file + ": " + key + ": expected a number, got " + e);
            }
        }

        boolean optBoolean(String key, boolean fallback) throws MalformedModelException {
            JsonElement e = get(key);
            if (e == null) {
                return fallback;
            }
            if (!e.isJsonPrimitive() || !e.getAsJsonPrimitive().isBoolean()) {
                throw new MalformedModelException(
                        file + ": " + key + ": expected true or false, got " + e);
            }
            return e.getAsBoolean();
        }

        String optString(String key, String fallback) throws MalformedModelException {
            JsonElement e = get(key);
            if (e == null) {
                return fallback;
            }
            if (!e.isJsonPrimitive()) {
                throw new MalformedModelException(
                        file + ": " + key + ": expected a string, got " + e);
            }
            return e.getAsString();
        }

        /**
         * A window size: the default when the key is absent (as transformers' config classes),
         * 0 (none) when it is null, else a positive integer.
         */
        int optWindow(String key, int absent) throws MalformedModelException {
            if (!config.has(key)) {
                return absent;
            }
            JsonElement e = get(key);
            if (e == null) {
                return 0;
            }
            int window = asInt(key, e);
            if (window < 1) {
                throw refuse(key, e.toString(), "expected a window >= 1 or null (none)");
            }
            return window;
        }

        /**
         * A soft-cap: the default when the key is absent, 0 (none) when it is null, else a
         * positive finite number.
         */
        float optCap(String key, float absent) throws MalformedModelException {
            if (!config.has(key)) {
                return absent;
            }
            JsonElement e = get(key);
            if (e == null) {
                return 0;
            }
            double cap = optDouble(key, 0);
            // The cap is a float32 in the operators: it must stay finite and normal there.
            if (!(cap >= Float.MIN_NORMAL) || (float) cap == Float.POSITIVE_INFINITY) {
                throw refuse(
                        key,
                        e.toString(),
                        "expected a positive soft-cap float32 holds as a normal number, or null"
                                + " (none)");
            }
            return (float) cap;
        }

        void refuseTrue(String key, String what) throws MalformedModelException {
            if (optBoolean(key, false)) {
                throw refuse(key, "true", what + " is not supported");
            }
        }

        void refusePresent(String key, String what) throws MalformedModelException {
            JsonElement e = get(key);
            if (e != null) {
                throw refuse(key, e.toString(), what + " is not supported");
            }
        }

        MalformedModelException refuse(String key, String value, String why) {
            return new MalformedModelException(file + ": " + key + " = " + value + ": " + why);
        }
    }
}
