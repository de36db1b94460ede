/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.Model;
import ai.djl.engine.Engine;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.modality.Classifications;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.translate.Translator;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonParser;

import io.djlattention.GemmMode;
import io.djlattention.zoo.args.KnownArguments;
import io.djlattention.zoo.hf.HfCheckpoint;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Builds encoder (BERT-architecture) {@link ZooModel}s for the model zoo's loaders.
 *
 * <p>Tasks, by the criteria's types:
 *
 * <ul>
 *   <li>{@code String → float[]}: sentence embeddings ({@link SentenceEmbeddingTranslator}; the
 *       block outputs pooled embeddings);
 *   <li>{@code String → Classifications}: fill-mask ({@link FillMaskTranslator}); the checkpoint
 *       must carry the masked-LM head ({@code cls.predictions.*}, as {@code BertForMaskedLM} saves
 *       it).
 * </ul>
 *
 * <p>Arguments ({@code Criteria.Builder.optArgument}; strings or typed values):
 *
 * <ul>
 *   <li>{@code normalize}: {@code true} (default) or {@code false}, L2 normalisation of embeddings;
 *   <li>{@code pooling}: {@code mean} (default; sentence-transformers' mean pooling) or {@code cls};
 *   <li>{@code maxLength}: the most tokens per text, special tokens included, in {@code [2,
 *       max_position_embeddings]} (default {@code max_position_embeddings}); longer texts are
 *       truncated with a warning;
 *   <li>{@code attention}: {@code fused} (default; the padding-free fused path) or {@code stock}
 *       (stock DJL ops, the baseline);
 *   <li>{@code dtype}: {@code float32} (default) or {@code float16}: GEMMs and attention in
 *       float16 from float16 copies of the weights, LayerNorm statistics and pooling in float32.
 *       Meant for GPUs; the CPU kernels run it too (correct, max |diff| 5e-3 on the test fixture's
 *       hidden states) but libtorch's float16 GEMMs make it about 2.8x slower than float32 there
 *       (all-MiniLM-L6-v2, batch 32 x 128, one thread), so loading it on the CPU logs a warning;
 *   <li>{@code topK} (fill-mask, default 5) and {@code maskToken} (fill-mask, default the
 *       tokenizer's special token containing "mask", else {@code [MASK]}).
 * </ul>
 *
 * Any other argument is refused with an {@link IllegalArgumentException} listing these ({@link
 * #ARGUMENTS}).
 *
 * <p>The device is {@code criteria.getDevice()}, else the PyTorch engine's default device (a GPU
 * when DJL sees one). The model's properties carry {@code maxLength}, {@code hiddenSize}, {@code
 * maxPositions}, {@code vocabSize}, {@code numLayers}, {@code numHeads}, {@code architecture},
 * {@code attention}, {@code dtype}, {@code pooling}, {@code normalize} and {@code task}.
 */
public final class EncoderModels {

    private static final Logger logger = LoggerFactory.getLogger(EncoderModels.class);

    /** The name of the built-in model. */
    public static final String MINILM_NAME = "all-MiniLM-L6-v2";

    /** Every argument {@link #load} reads; any other is refused, naming these. */
    public static final KnownArguments ARGUMENTS =
            new KnownArguments(
                    "encoder models (EncoderModels)",
                    List.of(
                            "attention",
                            "dtype",
                            "gemm",
                            "maskToken",
                            "maxLength",
                            "normalize",
                            "pooling",
                            "topK"));

    private EncoderModels() {}

    /** What a criteria's types ask for. */
    private enum Task {
        EMBEDDING,
        FILL_MASK
    }

    /**
     * Loads a BERT-architecture encoder as a model of the criteria's input and output types.
     *
     * @param checkpoint a Hugging Face checkpoint directory, or {@code null} for the built-in
     *     all-MiniLM-L6-v2
     * @param criteria the criteria (types, device, arguments)
     * @param <I> the input type
     * @param <O> the output type
     * @return the model
     * @throws ModelNotFoundException if the criteria's types are not an encoder task
     * @throws MalformedModelException if the checkpoint is not a supported encoder (unsupported
     *     architecture or configuration, a missing tensor, no masked-LM head for fill-mask)
     * @throws IOException if a file cannot be read ({@code config.json}, weights, {@code
     *     tokenizer.json}; the message names the file)
     * @throws IllegalArgumentException if an argument is invalid (the message names it) or
     *     unknown (the message lists the known ones)
     */
    public static <I, O> ZooModel<I, O> load(Path checkpoint, Criteria<I, O> criteria)
            throws ModelNotFoundException, MalformedModelException, IOException {
        Task task = task(criteria);
        Map<String, Object> args =
                criteria.getArguments() == null ? Map.of() : criteria.getArguments();
        ARGUMENTS.check(args);
        boolean normalize = booleanArgument(args, "normalize", true);
        BertEncoder.Pooling pooling =
                choice(args, "pooling", BertEncoder.Pooling.MEAN, BertEncoder.Pooling.values());
        BertEncoder.Attention attention =
                choice(
                        args,
                        "attention",
                        BertEncoder.Attention.FUSED,
                        BertEncoder.Attention.values());
        DataType dtype = dtype(args);
        // "bfloat16" / "int8": the CPU fused path's GEMMs (BertEncoder.Builder.optGemm).
        GemmMode gemm =
                GemmMode.valueOf(
                        choiceString(args, "gemm", "float32", "bfloat16", "int8")
                                .toUpperCase(Locale.ROOT));
        Device device = criteria.getDevice();
        if (device == null) {
            device = Engine.getEngine("PyTorch").defaultDevice();
        }
        if (dtype == DataType.FLOAT16 && !device.isGpu()) {
            logger.warn(
                    "dtype float16 on {}: supported, but slower than float32 there (libtorch's"
                            + " float16 GEMMs; 2.8x slower measured for all-MiniLM-L6-v2)",
                    device);
        }

        BertEncoderConfig config;
        Path tokenizerFile;
        String name;
        String architecture;
        HfCheckpoint hf = null;
        if (checkpoint == null) {
            if (task == Task.FILL_MASK) {
                throw new MalformedModelException(
                        MINILM_NAME
                                + ": the built-in model has no masked-LM head (cls.predictions.*);"
                                + " fill-mask needs a BertForMaskedLM checkpoint directory");
            }
            config = miniLmConfig();
            tokenizerFile = MiniLm.tokenizerFile();
            name = MINILM_NAME;
            architecture = "BertModel";
        } else {
            hf = HfCheckpoint.open(checkpoint);
            config = BertEncoderConfig.fromCheckpoint(hf);
            // Before the weights: a missing tokenizer fails fast, naming the file.
            tokenizerFile = hf.requireTokenizerFile();
            Path fileName = checkpoint.toAbsolutePath().normalize().getFileName();
            name = fileName == null ? checkpoint.toString() : fileName.toString();
            architecture = hf.getArchitecture();
        }
        if (criteria.getModelName() != null) {
            name = criteria.getModelName();
        }
        int maxLength = intArgument(args, "maxLength", config.getMaxPositions());
        if (maxLength < 2 || maxLength > config.getMaxPositions()) {
            throw new IllegalArgumentException(
                    "maxLength: expected a value in [2, max_position_embeddings = "
                            + config.getMaxPositions()
                            + "], got "
                            + maxLength);
        }

        BertEncoder block =
                BertEncoder.builder()
                        .setConfig(config)
                        .optMaskedLmHead(task == Task.FILL_MASK)
                        .optComputeDataType(dtype)
                        .optAttention(attention)
                        .optGemm(gemm)
                        .optPooling(pooling)
                        .optOutput(
                                task == Task.FILL_MASK
                                        ? BertEncoder.Output.MASKED_LM
                                        : BertEncoder.Output.SENTENCE_EMBEDDING)
                        .build();
        Model model = Model.newInstance(name, device, "PyTorch");
        try {
            NDManager manager = model.getNDManager();
            try (NDManager temp = NDManager.newBaseManager(Device.cpu(), "PyTorch")) {
                Map<String, NDArray> tensors;
                if (hf == null) {
                    tensors = MiniLm.weights(temp);
                    block.setWeights(manager, tensors, MINILM_NAME);
                } else {
                    tensors = hf.readTensors(temp);
                    if (task == Task.FILL_MASK && !BertEncoder.hasMaskedLmHead(tensors)) {
                        // Names the file and the first head tensor it lacks.
                        String missing =
                                tensors.containsKey("cls.predictions.transform.dense.weight")
                                        ? "cls.predictions.bias"
                                        : "cls.predictions.transform.dense.weight";
                        throw new MalformedModelException(
                                hf.getWeightsFile()
                                        + ": missing tensor "
                                        + missing
                                        + " (fill-mask needs the masked-LM head of"
                                        + " BertForMaskedLM)");
                    }
                    block.setWeights(manager, tensors, hf);
                }
            }
            model.setBlock(block);
            HuggingFaceTokenizer tokenizer = tokenizer(tokenizerFile);
            manager.attachInternal("tokenizer-" + System.identityHashCode(tokenizer), tokenizer);
            Translator<?, ?> translator;
            if (task == Task.FILL_MASK) {
                FillMaskTranslator.Builder b =
                        FillMaskTranslator.builder()
                                .setTokenizer(tokenizer)
                                .setMaxLength(maxLength)
                                .optPadTokenId(config.getPadTokenId())
                                .optTopK(intArgument(args, "topK", 5))
                                .optMaskToken(
                                        stringArgument(
                                                args, "maskToken", maskToken(tokenizerFile)));
                translator = b.build();
            } else {
                translator =
                        SentenceEmbeddingTranslator.builder()
                                .setTokenizer(tokenizer)
                                .setMaxLength(maxLength)
                                .optNormalize(normalize)
                                .optPadTokenId(config.getPadTokenId())
                                .build();
            }
            model.setProperty("task", task == Task.FILL_MASK ? "fill-mask" : "text-embedding");
            model.setProperty("architecture", architecture);
            model.setProperty("maxLength", String.valueOf(maxLength));
            model.setProperty("maxPositions", String.valueOf(config.getMaxPositions()));
            model.setProperty("hiddenSize", String.valueOf(config.getHiddenSize()));
            model.setProperty("vocabSize", String.valueOf(config.getVocabSize()));
            model.setProperty("numLayers", String.valueOf(config.getNumLayers()));
            model.setProperty("numHeads", String.valueOf(config.getNumHeads()));
            model.setProperty("attention", attention.name().toLowerCase(Locale.ROOT));
            model.setProperty("dtype", dtype == DataType.FLOAT16 ? "float16" : "float32");
            model.setProperty("gemm", gemm.name().toLowerCase(Locale.ROOT));
            model.setProperty("pooling", pooling.name().toLowerCase(Locale.ROOT));
            model.setProperty("normalize", String.valueOf(normalize));
            @SuppressWarnings("unchecked")
            Translator<I, O> typed = (Translator<I, O>) translator;
            return new ZooModel<>(model, typed);
        } catch (IOException | MalformedModelException | RuntimeException e) {
            model.close();
            throw e;
        }
    }

    /**
     * Returns the configuration of the built-in all-MiniLM-L6-v2 (vocabulary 30522, hidden 384, 6
     * layers, 12 heads, intermediate 1536, 512 positions, 2 token types, eps 1e-12).
     *
     * @return the configuration
     */
    public static BertEncoderConfig miniLmConfig() {
        return BertEncoderConfig.builder()
                .setVocabSize(MiniLm.VOCAB_SIZE)
                .setHiddenSize(MiniLm.HIDDEN_SIZE)
                .setNumLayers(MiniLm.NUM_LAYERS)
                .setNumHeads(MiniLm.NUM_HEADS)
                .setIntermediateSize(MiniLm.INTERMEDIATE_SIZE)
                .optMaxPositions(MiniLm.MAX_POSITIONS)
                .optTypeVocabSize(MiniLm.TYPE_VOCAB_SIZE)
                .optLayerNormEps(MiniLm.LAYER_NORM_EPS)
                .build();
    }

    /**
     * Creates the tokenizer the translators expect: special tokens added, no truncation (the
     * translators truncate and warn), no padding (they pad a batch to its longest text), whatever
     * {@code tokenizer.json} sets.
     *
     * @param file the {@code tokenizer.json}
     * @return the tokenizer
     * @throws IOException if the file cannot be read or parsed (the message names it)
     */
    public static HuggingFaceTokenizer tokenizer(Path file) throws IOException {
        try {
            return HuggingFaceTokenizer.newInstance(
                    file,
                    Map.of(
                            "addSpecialTokens", "true",
                            "truncation", "false",
                            "padding", "false"));
        } catch (RuntimeException e) {
            throw new IOException(file + ": cannot load the tokenizer: " + e.getMessage(), e);
        }
    }

    /** The tokenizer's special token that names a mask ({@code [MASK]}, {@code <mask>}). */
    private static String maskToken(Path tokenizerFile) throws IOException {
        try {
            JsonElement root =
                    JsonParser.parseString(
                            Files.readString(tokenizerFile, StandardCharsets.UTF_8));
            JsonElement added = root.isJsonObject() ? root.getAsJsonObject().get("added_tokens") : null;
            if (added != null && added.isJsonArray()) {
                for (JsonElement e : added.getAsJsonArray()) {
                    if (!e.isJsonObject()) {
                        continue;
                    }
                    JsonObject token = e.getAsJsonObject();
                    JsonElement content = token.get("content");
                    JsonElement special = token.get("special");
                    if (content != null
                            && content.isJsonPrimitive()
                            && (special == null || special.getAsBoolean())
                            && content.getAsString().toLowerCase(Locale.ROOT).contains("mask")) {
                        return content.getAsString();
                    }
                }
            }
        } catch (JsonParseException | IllegalStateException | UnsupportedOperationException e) {
            throw new IOException(tokenizerFile + ": malformed JSON: " + e.getMessage(), e);
        }
        return "[MASK]";
    }

    private static Task task(Criteria<?, ?> criteria) throws ModelNotFoundException {
        Class<?> in = criteria.getInputClass();
        Class<?> out = criteria.getOutputClass();
        if (in == String.class && out == float[].class) {
            return Task.EMBEDDING;
        }
        if (in == String.class && out == Classifications.class) {
            return Task.FILL_MASK;
        }
        throw new ModelNotFoundException(
                "encoder models take String -> float[] (sentence embeddings) or String ->"
                        + " Classifications (fill-mask), got "
                        + (in == null ? "null" : in.getName())
                        + " -> "
                        + (out == null ? "null" : out.getName()));
    }

    private static DataType dtype(Map<String, Object> args) {
        Object value = args.get("dtype");
        if (value == null) {
            return DataType.FLOAT32;
        }
        switch (value.toString().toLowerCase(Locale.ROOT)) {
            case "float32":
            case "fp32":
                return DataType.FLOAT32;
            case "float16":
            case "fp16":
                return DataType.FLOAT16;
            default:
                throw new IllegalArgumentException(
                        "dtype: expected float32 or float16, got " + value);
        }
    }

    /** The argument's value among `values` (case-insensitive), the first when absent. */
    private static String choiceString(Map<String, Object> args, String key, String... values) {
        Object value = args.get(key);
        if (value == null) {
            return values[0];
        }
        for (String v : values) {
            if (v.equalsIgnoreCase(value.toString())) {
                return v;
            }
        }
        throw new IllegalArgumentException(
                key + ": expected one of " + String.join(", ", values) + ", got " + value);
    }

    private static <E extends Enum<E>> E choice(
            Map<String, Object> args, String key, E fallback, E[] values) {
        Object value = args.get(key);
        if (value == null) {
            return fallback;
        }
        for (E e : values) {
            if (e.name().equalsIgnoreCase(value.toString())) {
                return e;
            }
        }
        StringBuilder names = new StringBuilder();
        for (E e : values) {
            names.append(names.length() == 0 ? "" : " or ")
                    .append(e.name().toLowerCase(Locale.ROOT));
        }
        throw new IllegalArgumentException(key + ": expected " + names + ", got " + value);
    }

    private static boolean booleanArgument(Map<String, Object> args, String key, boolean fallback) {
        Object value = args.get(key);
        if (value == null) {
            return fallback;
        }
        if (value instanceof Boolean) {
            return (Boolean) value;
        }
        String s = value.toString().toLowerCase(Locale.ROOT);
        if ("true".equals(s) || "false".equals(s)) {
            return Boolean.parseBoolean(s);
        }
        throw new IllegalArgumentException(key + ": expected true or false, got " + value);
    }

    private static int intArgument(Map<String, Object> args, String key, int fallback) {
        Object value = args.get(key);
        if (value == null) {
            return fallback;
        }
        if (value instanceof Number) {
            double d = ((Number) value).doubleValue();
            if (d == Math.rint(d) && Math.abs(d) <= Integer.MAX_VALUE) {
                return (int) d;
            }
        } else {
            try {
                return Integer.parseInt(value.toString().trim());
            } catch (NumberFormatException e) {
                // reported below
            }
        }
        throw new IllegalArgumentException(key + ": expected an integer, got " + value);
    }

    private static String stringArgument(Map<String, Object> args, String key, String fallback) {
        Object value = args.get(key);
        return value == null ? fallback : value.toString();
    }
}
