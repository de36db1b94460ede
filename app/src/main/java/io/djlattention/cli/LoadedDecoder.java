/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import ai.djl.MalformedModelException;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;

import com.google.gson.JsonElement;

import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.decoder.Decoder;
import io.djlattention.zoo.decoder.HfDecoderLoader;
import io.djlattention.zoo.decoder.Llama2cLoader;
import io.djlattention.zoo.hf.HfCheckpoint;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The decoder {@code generate} serves: the built-in stories260K, a llama2.c file, or a Hugging Face
 * checkpoint directory, loaded by the model zoo's own loaders.
 *
 * @param decoder the decoder, weights on the manager's device
 * @param name what the report calls it
 * @param bosTokenId the id the prompts start with, or -1 for none
 */
record LoadedDecoder(Decoder decoder, String name, int bosTokenId) {

    /** llama2.c's BOS id (its tokenizer: 0 unk, 1 bos, 2 eos). */
    private static final int LLAMA2C_BOS = 1;

    static LoadedDecoder load(Path model, NDManager manager, DataType dataType)
            throws IOException, MalformedModelException {
        if (model == null) {
            try (InputStream in = DecoderModels.class.getResourceAsStream(DecoderModels.STORIES260K)) {
                if (in == null) {
                    throw new IOException(
                            DecoderModels.STORIES260K + ": missing from the model-zoo jar");
                }
                Decoder d = Llama2cLoader.load(in, DecoderModels.STORIES260K, manager, dataType);
                return new LoadedDecoder(d, "stories260K (built in)", LLAMA2C_BOS);
            }
        }
        if (Files.isRegularFile(model)) {
            return new LoadedDecoder(
                    Llama2cLoader.load(model, manager, dataType),
                    model.getFileName().toString(),
                    LLAMA2C_BOS);
        }
        HfCheckpoint checkpoint = HfCheckpoint.open(model);
        if (!HfDecoderLoader.supports(checkpoint)) {
            throw new IOException(
                    model.resolve("config.json")
                            + ": architecture "
                            + checkpoint.getArchitecture()
                            + " is not a decoder generate can serve (supported: "
                            + HfDecoderLoader.ARCHITECTURES
                            + ", or a llama2.c .bin file)");
        }
        JsonElement bos = checkpoint.getConfig().get("bos_token_id");
        int bosId = bos != null && bos.isJsonPrimitive() ? bos.getAsInt() : -1;
        return new LoadedDecoder(
                HfDecoderLoader.load(checkpoint, manager, dataType),
                model.getFileName().toString(),
                bosId);
    }
}
