/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.serving;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;

import io.djlattention.zoo.generate.GenerationEngine;

/**
 * The generation model a server serves.
 *
 * @param name the model's name in the API ({@code model} field, {@code /v1/models})
 * @param engine the engine that runs it (the server closes it)
 * @param tokenizer its tokenizer, or null: then prompts must be token ids and the completions'
 *     {@code text} is empty (the token ids are in {@code token_ids})
 * @param eosTokenId the end-of-sequence token, or -1
 */
public record ServedGenerator(
        String name, GenerationEngine engine, HuggingFaceTokenizer tokenizer, long eosTokenId) {}
