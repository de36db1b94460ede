/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.generate.GenerationBlock;
import io.djlattention.zoo.generate.GenerationEngine;

import java.io.IOException;
import java.nio.file.Paths;
import java.util.function.Consumer;

/**
 * The generation model a server serves.
 *
 * @param name the model's name in the API ({@code model} field, {@code /v1/models})
 * @param engine the engine that runs it (the server closes it)
 * @param tokenizer its tokenizer, or null: then prompts must be token ids and the completions'
 *     {@code text} is empty (the token ids are in {@code token_ids})
 * @param eosTokenId the end-of-sequence token, or -1
 * @param chatTemplate the chat template that {@code /v1/chat/completions} renders, or null (then
 *     that route answers 400); it needs the tokenizer
 */
public record ServedGenerator(
        String name,
        GenerationEngine engine,
        HuggingFaceTokenizer tokenizer,
        long eosTokenId,
        ChatTemplate chatTemplate) {

    /**
     * Serves a model without a chat template.
     *
     * @param name the model's name in the API
     * @param engine the engine that runs it (the server closes it)
     * @param tokenizer its tokenizer, or null
     * @param eosTokenId the end-of-sequence token, or -1
     */
    public ServedGenerator(
            String name, GenerationEngine engine, HuggingFaceTokenizer tokenizer, long eosTokenId) {
        this(name, engine, tokenizer, eosTokenId, null);
    }

    /** Checks that a chat template comes with a tokenizer. */
    public ServedGenerator {
        if (chatTemplate != null && tokenizer == null) {
            throw new IllegalArgumentException("chatTemplate: needs the model's tokenizer");
        }
    }

    /**
     * Serves a model-zoo decoder ({@code DecoderModels}, block {@link GenerationBlock}): an engine
     * on its decoder with its block size, prefill kernel and prefix sharing, its tokenizer (model
     * property {@code tokenizer}), the chat template saved beside it (if any: {@link
     * ChatTemplate#fromDirectory}) and its EOS token.
     *
     * @param name the model's name in the API
     * @param model the model; it must outlive the server
     * @param options further engine settings (batch, queue, cache size), applied last
     * @return the served model
     * @throws IOException if the tokenizer cannot be read
     * @throws IllegalArgumentException if the model's block is not a {@link GenerationBlock}
     */
    public static ServedGenerator fromZooModel(
            String name, ZooModel<?, ?> model, Consumer<GenerationEngine.Builder> options)
            throws IOException {
        if (!(model.getBlock() instanceof GenerationBlock)) {
            throw new IllegalArgumentException(
                    "model: expected a decoder model (block GenerationBlock), got "
                            + model.getBlock().getClass().getSimpleName());
        }
        GenerationBlock block = (GenerationBlock) model.getBlock();
        GenerationEngine.Builder b =
                GenerationEngine.builder()
                        .setDecoder(block.getDecoder())
                        .optDevice(model.getNDManager().getDevice())
                        .optBlockSize(block.getBlockSize())
                        .optPrefillAttention(block.getPrefillAttention())
                        .optPrefixSharing(block.isPrefixSharing())
                        .optKvCacheDtype(block.getKvCacheDtype())
                        .optKvCacheScales(block.getKvCacheScales())
                        .optMaxBatchSize(block.getMaxBatchSize());
        if (block.getNumBlocks() > 0) {
            b.optNumBlocks(block.getNumBlocks());
        }
        options.accept(b);
        String tokenizerFile = model.getProperty("tokenizer");
        HuggingFaceTokenizer tokenizer =
                tokenizerFile == null
                        ? null
                        : DecoderModels.openTokenizer(Paths.get(tokenizerFile));
        ChatTemplate chat = null;
        if (tokenizerFile != null) {
            chat = ChatTemplate.fromDirectory(Paths.get(tokenizerFile).toAbsolutePath().getParent());
        }
        return new ServedGenerator(name, b.build(), tokenizer, block.getEosTokenId(), chat);
    }
}
