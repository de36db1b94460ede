/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.paged;

import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;

import com.google.gson.JsonArray;
import com.google.gson.JsonParser;

import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.Llama2cLoader;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * The built-in stories260K checkpoint (a model-zoo resource) and its greedy reference (a test
 * resource: llama2.c's C forward and a float64 NumPy forward, which agree token for token).
 */
public final class Stories260k {

    /** The test resource holding the greedy reference. */
    public static final String REFERENCE = "/io/djlattention/it/paged/stories260K_greedy_reference.json";

    private Stories260k() {}

    /**
     * Loads the checkpoint from the model zoo's resources.
     *
     * @param manager the manager that owns the parameters
     * @param dataType float32 or float16
     * @return the decoder
     * @throws IOException if the resource cannot be read
     */
    public static Decoder load(NDManager manager, DataType dataType) throws IOException {
        try (InputStream in = DecoderModels.class.getResourceAsStream(DecoderModels.STORIES260K)) {
            if (in == null) {
                throw new IOException("missing class path resource " + DecoderModels.STORIES260K);
            }
            return Llama2cLoader.load(in, "stories260K", manager, dataType);
        }
    }

    /**
     * Returns the reference cases: {@code prompt}, {@code generated} (greedy ids) and {@code
     * logits_after_prompt_first8} of each.
     *
     * @return the cases
     */
    public static JsonArray reference() {
        try (InputStream in = Stories260k.class.getResourceAsStream(REFERENCE)) {
            if (in == null) {
                throw new IOException("missing test resource " + REFERENCE);
            }
            return JsonParser.parseString(new String(in.readAllBytes(), StandardCharsets.UTF_8))
                    .getAsJsonArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
