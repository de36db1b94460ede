/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.Device;
import ai.djl.MalformedModelException;
import ai.djl.Model;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.ndarray.types.DataType;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.translate.ArgumentsUtil;
import ai.djl.translate.Translator;

import io.djlattention.paged.KvCacheDtype;
import io.djlattention.paged.KvCacheScales;
import io.djlattention.zoo.args.KnownArguments;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Decoder.PrefillAttention;
import io.djlattention.zoo.decoder.DecoderConfig;
import io.djlattention.zoo.decoder.HfDecoderLoader;
import io.djlattention.zoo.decoder.Llama2cLoader;
import io.djlattention.zoo.generate.GenerationBlock;
import io.djlattention.zoo.generate.GenerationConfig;
import io.djlattention.zoo.generate.GenerationTranslator;
import io.djlattention.zoo.hf.HfCheckpoint;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;

/**
 * Builds decoder (text generation) {@link ZooModel}s for the model zoo's loaders.
 *
 * <p>The checkpoint decides the loader: {@code null} is the built-in stories260K (llama2.c,
 * class path resource {@value #STORIES260K}); a directory is a Hugging Face checkpoint ({@link
 * HfDecoderLoader}: its {@link HfDecoderLoader#ARCHITECTURES}); a file is a llama2.c
 * checkpoint ({@link Llama2cLoader}). The model's block is a {@link GenerationBlock}; its
 * properties: {@code tokenizer} (the path of the {@code tokenizer.json} in use, when there is one),
 * {@code eosTokenId}, {@code maxPositions}, {@code architecture}, {@code attention}.
 *
 * <p>Types: {@code int[] → int[]} (prompt token ids to generated ids) for every checkpoint; {@code
 * String → String} (prompt text to the decoded continuation) when a tokenizer is known: the
 * checkpoint directory's {@code tokenizer.json}, or the argument {@code tokenizer}.
 *
 * <p>Criteria arguments (all optional):
 *
 * <ul>
 *   <li>{@code maxNewTokens} (default 64): tokens to generate at most per request;
 *   <li>{@code temperature} (default 0: greedy), {@code topK} (default 0: all), {@code seed}
 *       (default 0): sampling when the temperature is positive;
 *   <li>{@code eosTokenId}: the token that stops a request (default: {@code eos_token_id} of
 *       {@code generation_config.json}, else {@code config.json}; 1 for llama2.c checkpoints, whose
 *       {@code run.c} stops at BOS; -1 for none);
 *   <li>{@code attention}: {@code paged} (default: paged KV cache and the continuous-batching
 *       scheduler), {@code flash} (contiguous cache, {@code flash_attention}) or {@code stock}
 *       (contiguous cache, stock DJL ops);
 *   <li>{@code prefill}: the paged path's prefill kernel, {@code flash} (default) or {@code paged};
 *   <li>{@code dtype}: {@code float32} (default) or {@code float16};
 *   <li>{@code maxBatchSize} (default 32), {@code blockSize} (default 16), {@code numBlocks}
 *       (default 0: each call's cache holds exactly what its requests can use), {@code
 *       prefixSharing} (default true): the paged cache and scheduler;
 *   <li>{@code kvCacheDtype}: what the paged cache stores, {@code auto} (default: the model's
 *       {@code dtype}) or {@code fp8} / {@code fp8_e4m3} / {@code fp8_e5m2} (one byte per element,
 *       {@link KvCacheDtype#FP8_E4M3} or {@link KvCacheDtype#FP8_E5M2}); {@code kvCacheScale} (default 1; only with fp8): the key and
 *       value scale of every layer ({@link KvCacheScales#perTensor});
 *   <li>{@code tokenizer}: a {@code tokenizer.json} to use instead of the checkpoint's.
 * </ul>
 *
 * Any other argument is refused with an {@link IllegalArgumentException} listing these ({@link
 * #ARGUMENTS}).
 *
 * <p>The device is the criteria's ({@code optDevice}), else the engine's default (the GPU when
 * PyTorch sees one).
 *
 * <p>Bad input: an empty prompt (or a text that encodes to no tokens), a token id outside the
 * vocabulary, and a prompt of the model's max positions or more are refused, not truncated: the
 * predictor throws a {@code TranslateException} whose cause names the request and the limit.
 * Generation stops at the max positions. A checkpoint with an unknown architecture, a refused
 * {@code config.json} key or a missing tensor fails to load with a {@link
 * MalformedModelException} naming the file and the key or tensor.
 */
public final class DecoderModels {

    /** The class path resource of the built-in stories260K checkpoint (llama2.c format). */
    public static final String STORIES260K =
            "/io/djlattention/zoo/models/stories260K/stories260K.bin";

    /** Every argument {@link #load} reads; any other is refused, naming these. */
    public static final KnownArguments ARGUMENTS =
            new KnownArguments(
                    "decoder models (DecoderModels)",
                    List.of(
                            "attention",
                            "blockSize",
                            "dtype",
                            "eosTokenId",
                            "kvCacheDtype",
                            "kvCacheScale",
                            "maxBatchSize",
                            "maxNewTokens",
                            "numBlocks",
                            "prefill",
                            "prefixSharing",
                            "seed",
                            "temperature",
                            "tokenizer",
                            "topK"));

    private DecoderModels() {}

    /**
     * Loads a decoder as a model of the criteria's input and output types.
     *
     * @param checkpoint a Hugging Face checkpoint directory (one of {@link
     *     HfDecoderLoader#ARCHITECTURES}), a llama2.c checkpoint file, or {@code null} for the
     *     built-in stories260K
     * @param criteria the criteria (types, device, arguments)
     * @param <I> the input type
     * @param <O> the output type
     * @return the model
     * @throws ModelNotFoundException if the criteria's types are not a generation task
     * @throws MalformedModelException if the checkpoint is not a supported decoder, a tensor is
     *     missing, an argument is invalid, or text input has no tokenizer
     * @throws IOException if a file cannot be read
     * @throws IllegalArgumentException if an argument is unknown (the message lists the known
     *     ones)
     */
    @SuppressWarnings("unchecked")
    public static <I, O> ZooModel<I, O> load(Path checkpoint, Criteria<I, O> criteria)
            throws ModelNotFoundException, MalformedModelException, IOException {
        Class<I> in = criteria.getInputClass();
        Class<O> out = criteria.getOutputClass();
        boolean text = in == String.class && out == String.class;
        boolean tokens = in == int[].class && out == int[].class;
        if (!text && !tokens) {
            throw new ModelNotFoundException(
                    "decoder models take String → String (with a tokenizer.json) or int[] → int[]"
                            + " (token ids), got "
                            + (in == null ? "null" : in.getSimpleName())
                            + " → "
                            + (out == null ? "null" : out.getSimpleName()));
        }
        Map<String, Object> args =
                criteria.getArguments() == null ? Map.of() : criteria.getArguments();
        ARGUMENTS.check(args);
        DataType dataType = dataType(args);
        GenerationBlock.Attention attention =
                choice(args, "attention", GenerationBlock.Attention.class, "paged");
        PrefillAttention prefill = choice(args, "prefill", PrefillAttention.class, "flash");
        Device device = criteria.getDevice();
        String name =
                checkpoint == null
                        ? "stories260K"
                        : String.valueOf(checkpoint.toAbsolutePath().normalize().getFileName());
        Model model = Model.newInstance(name, device, "PyTorch");
        try {
            Decoder decoder;
            Path tokenizerFile = null;
            long eos;
            if (checkpoint == null) {
                try (InputStream stream = DecoderModels.class.getResourceAsStream(STORIES260K)) {
                    if (stream == null) {
                        throw new IOException("class path resource " + STORIES260K + " is missing");
                    }
                    decoder =
                            Llama2cLoader.load(
                                    stream, "stories260K", model.getNDManager(), dataType);
                }
                eos = 1;
            } else if (Files.isDirectory(checkpoint)) {
                HfCheckpoint hf = HfCheckpoint.open(checkpoint);
                decoder = HfDecoderLoader.load(hf, model.getNDManager(), dataType);
                tokenizerFile = hf.getTokenizerFile().orElse(null);
                eos = HfDecoderLoader.eosTokenId(hf, decoder.getConfig().getVocabSize());
            } else if (Files.isRegularFile(checkpoint)) {
                decoder = Llama2cLoader.load(checkpoint, model.getNDManager(), dataType);
                eos = 1;
            } else {
                throw new IOException(
                        checkpoint
                                + ": no such file or directory (expected a Hugging Face checkpoint"
                                + " directory or a llama2.c .bin file)");
            }
            String tokenizerArg = ArgumentsUtil.stringValue(args, "tokenizer");
            if (tokenizerArg != null) {
                tokenizerFile = Paths.get(tokenizerArg);
                if (!Files.isRegularFile(tokenizerFile)) {
                    throw new IOException(
                            tokenizerFile + ": missing (named by the argument tokenizer)");
                }
            }
            HuggingFaceTokenizer tokenizer = null;
            if (text) {
                if (tokenizerFile == null) {
                    throw new MalformedModelException(
                            (checkpoint == null
                                            ? "stories260K has no tokenizer.json (its vocabulary"
                                                    + " file is not part of the checkpoint)"
                                            : Files.isDirectory(checkpoint)
                                                    ? checkpoint.resolve(HfCheckpoint.TOKENIZER)
                                                            + ": missing"
                                                    : checkpoint + " has no tokenizer.json")
                                    + ": String input needs one; load the model with int[] → int[]"
                                    + " or name a tokenizer.json with the argument tokenizer");
                }
                tokenizer = openTokenizer(tokenizerFile);
                model.getNDManager().attachInternal(UUID.randomUUID().toString(), tokenizer);
            }
            eos = longArg(args, "eosTokenId", eos);
            int maxNewTokens = intArg(args, "maxNewTokens", 64);
            if (maxNewTokens < 1) {
                throw new MalformedModelException(
                        "argument maxNewTokens: expected >= 1, got " + maxNewTokens);
            }
            GenerationConfig.Builder generation =
                    GenerationConfig.builder().setMaxNewTokens(maxNewTokens).optEosTokenId(eos);
            float temperature = floatArg(args, "temperature", 0f);
            if (temperature < 0 || Float.isNaN(temperature)) {
                throw new MalformedModelException(
                        "argument temperature: expected >= 0 (0 = greedy), got " + temperature);
            }
            if (temperature > 0) {
                generation.optSampling(
                        temperature, intArg(args, "topK", 0), longArg(args, "seed", 0));
            }
            GenerationBlock block;
            try {
                block =
                        GenerationBlock.builder()
                                .setDecoder(decoder)
                                .setGenerationConfig(generation.build())
                                .optAttention(attention)
                                .optPrefillAttention(prefill)
                                .optMaxBatchSize(intArg(args, "maxBatchSize", 32))
                                .optBlockSize(intArg(args, "blockSize", 16))
                                .optNumBlocks(intArg(args, "numBlocks", 0))
                                .optPrefixSharing(
                                        ArgumentsUtil.booleanValue(args, "prefixSharing", true))
                                .optKvCacheDtype(kvCacheDtype(args))
                                .optKvCacheScales(kvCacheScales(args, kvCacheDtype(args)))
                                .build();
            } catch (IllegalArgumentException e) {
                throw new MalformedModelException("invalid argument: " + e.getMessage(), e);
            }
            model.setBlock(block);
            DecoderConfig config = decoder.getConfig();
            if (tokenizerFile != null) {
                model.setProperty("tokenizer", tokenizerFile.toAbsolutePath().toString());
            }
            model.setProperty("eosTokenId", Long.toString(eos));
            model.setProperty("maxPositions", Integer.toString(config.getMaxPositions()));
            model.setProperty("architecture", config.getArchitecture().name());
            model.setProperty("attention", attention.name().toLowerCase(Locale.ROOT));
            Translator<?, ?> translator =
                    text
                            ? GenerationTranslator.forText(tokenizer)
                            : GenerationTranslator.forTokens();
            return new ZooModel<>(model, (Translator<I, O>) translator);
        } catch (IOException | MalformedModelException | RuntimeException e) {
            model.close();
            throw e;
        }
    }

    /**
     * Opens a decoder's {@code tokenizer.json} as generation needs it: no truncation, no padding.
     * DJL's tokenizer otherwise truncates every text to 512 tokens (with a warning that {@code
     * maxLength} is not specified), which would cut a long prompt silently where the model would
     * generate from all of it, or refuse it by name at its max positions.
     *
     * @param file the {@code tokenizer.json}
     * @return the tokenizer (the caller closes it)
     * @throws IOException if the file cannot be read or is not a tokenizer (the message names it)
     */
    public static HuggingFaceTokenizer openTokenizer(Path file) throws IOException {
        try {
            return HuggingFaceTokenizer.newInstance(
                    file, Map.of("truncation", "false", "padding", "false"));
        } catch (RuntimeException e) {
            throw new IOException(file + ": cannot load the tokenizer: " + e.getMessage(), e);
        }
    }

    /**
     * Returns the model that does the work behind a model from DJL's {@code Criteria}: the model
     * zoo's {@code Criteria.loadModel()} returns a model whose translator delegates to the one
     * {@link #load} built (with the {@link GenerationBlock} and the properties); any other model
     * is returned as it is.
     *
     * @param model a model from {@code Criteria.loadModel()} or {@link #load}
     * @param <I> the input type
     * @param <O> the output type
     * @return the underlying model
     */
    public static <I, O> ZooModel<I, O> unwrap(ZooModel<I, O> model) {
        if (model.getTranslator() instanceof DelegatingTranslator) {
            return ((DelegatingTranslator<I, O>) model.getTranslator()).getDelegate();
        }
        return model;
    }

    /**
     * Returns the generation block of a decoder model (from {@code Criteria.loadModel()} or
     * {@link #load}): its decoder, settings, and what an engine needs to run its own scheduler.
     *
     * @param model the model
     * @return the block
     * @throws IllegalArgumentException if the model is not a decoder model of this zoo
     */
    public static GenerationBlock generationBlock(ZooModel<?, ?> model) {
        ai.djl.nn.Block block = unwrap(model).getBlock();
        if (!(block instanceof GenerationBlock)) {
            throw new IllegalArgumentException(
                    "model: expected a decoder model of the djl-attention zoo, got "
                            + model.getName()
                            + " with block "
                            + (block == null ? "null" : block.getClass().getSimpleName()));
        }
        return (GenerationBlock) block;
    }

    private static DataType dataType(Map<String, Object> args) throws MalformedModelException {
        String v = ArgumentsUtil.stringValue(args, "dtype", "float32").toLowerCase(Locale.ROOT);
        switch (v) {
            case "float32":
            case "fp32":
                return DataType.FLOAT32;
            case "float16":
            case "fp16":
                return DataType.FLOAT16;
            default:
                throw new MalformedModelException(
                        "argument dtype: expected float32 or float16 (DJL 0.36.0 cannot hold"
                                + " bfloat16: bfloat16 weights load as either), got "
                                + v);
        }
    }

    private static KvCacheDtype kvCacheDtype(Map<String, Object> args)
            throws MalformedModelException {
        try {
            return KvCacheDtype.fromString(ArgumentsUtil.stringValue(args, "kvCacheDtype", "auto"));
        } catch (IllegalArgumentException e) {
            throw new MalformedModelException("argument kvCacheDtype: " + e.getMessage(), e);
        }
    }

    /**
     * The argument kvCacheScale as per-tensor scales, or null when it is not given; refused, naming
     * the argument, unless kvCacheDtype is an FP8 cache.
     */
    private static KvCacheScales kvCacheScales(Map<String, Object> args, KvCacheDtype dtype)
            throws MalformedModelException {
        if (!args.containsKey("kvCacheScale")) {
            return null;
        }
        if (!dtype.isFp8()) {
            throw new MalformedModelException(
                    "argument kvCacheScale: scales apply to an FP8 cache (kvCacheDtype=fp8), got"
                            + " kvCacheDtype="
                            + ArgumentsUtil.stringValue(args, "kvCacheDtype", "auto"));
        }
        float scale = floatArg(args, "kvCacheScale", 1f);
        try {
            return KvCacheScales.perTensor(scale, scale);
        } catch (IllegalArgumentException e) {
            throw new MalformedModelException("argument kvCacheScale: " + e.getMessage(), e);
        }
    }

    private static <E extends Enum<E>> E choice(
            Map<String, Object> args, String key, Class<E> type, String fallback)
            throws MalformedModelException {
        String v = ArgumentsUtil.stringValue(args, key, fallback);
        try {
            return Enum.valueOf(type, v.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            StringBuilder names = new StringBuilder();
            for (E c : type.getEnumConstants()) {
                names.append(names.length() == 0 ? "" : ", ")
                        .append(c.name().toLowerCase(Locale.ROOT));
            }
            throw new MalformedModelException(
                    "argument " + key + ": expected one of " + names + ", got " + v, e);
        }
    }

    private static int intArg(Map<String, Object> args, String key, int fallback)
            throws MalformedModelException {
        try {
            return ArgumentsUtil.intValue(args, key, fallback);
        } catch (NumberFormatException e) {
            throw new MalformedModelException(
                    "argument " + key + ": expected an integer, got " + args.get(key), e);
        }
    }

    private static long longArg(Map<String, Object> args, String key, long fallback)
            throws MalformedModelException {
        try {
            return ArgumentsUtil.longValue(args, key, fallback);
        } catch (NumberFormatException e) {
            throw new MalformedModelException(
                    "argument " + key + ": expected an integer, got " + args.get(key), e);
        }
    }

    private static float floatArg(Map<String, Object> args, String key, float fallback)
            throws MalformedModelException {
        try {
            return ArgumentsUtil.floatValue(args, key, fallback);
        } catch (NumberFormatException e) {
            throw new MalformedModelException(
                    "argument " + key + ": expected a number, got " + args.get(key), e);
        }
    }
}
