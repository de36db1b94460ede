/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.hf;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonParser;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;

/**
 * A local Hugging Face checkpoint directory, as {@code save_pretrained} writes it: {@code
 * config.json}, the weights in {@code model.safetensors} or in shards named by {@code
 * model.safetensors.index.json} ({@code weight_map}), and optionally {@code tokenizer.json}.
 *
 * <p>Every error names the file it is about: a missing {@code config.json}, an index naming a shard
 * that is absent, a tensor the model needs and the checkpoint lacks ({@link #require}).
 */
public final class HfCheckpoint {

    /** The single-file weights name. */
    public static final String WEIGHTS = "model.safetensors";
    /** The sharded weights index name. */
    public static final String WEIGHTS_INDEX = "model.safetensors.index.json";
    /** The tokenizer file name. */
    public static final String TOKENIZER = "tokenizer.json";

    private final Path dir;
    private final JsonObject config;

    private HfCheckpoint(Path dir, JsonObject config) {
        this.dir = dir;
        this.config = config;
    }

    /**
     * Opens a checkpoint directory and reads its {@code config.json}.
     *
     * @param dir the directory
     * @return the checkpoint
     * @throws IOException if the directory or its {@code config.json} is missing or malformed
     */
    public static HfCheckpoint open(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) {
            throw new IOException(dir + ": not a directory (expected a Hugging Face checkpoint)");
        }
        Path file = dir.resolve("config.json");
        if (!Files.isRegularFile(file)) {
            throw new IOException(file + ": missing (a Hugging Face checkpoint needs config.json)");
        }
        return new HfCheckpoint(dir, readJson(file));
    }

    /**
     * Returns the directory.
     *
     * @return the directory
     */
    public Path getDirectory() {
        return dir;
    }

    /**
     * Returns the parsed {@code config.json}.
     *
     * @return the configuration object
     */
    public JsonObject getConfig() {
        return config;
    }

    /**
     * Returns the architecture {@code config.json} names: the first entry of {@code architectures},
     * else {@code model_type}, else an empty string.
     *
     * @return the architecture name, e.g. {@code BertModel}, {@code LlamaForCausalLM}
     */
    public String getArchitecture() {
        JsonElement archs = config.get("architectures");
        if (archs != null && archs.isJsonArray() && !archs.getAsJsonArray().isEmpty()) {
            return archs.getAsJsonArray().get(0).getAsString();
        }
        JsonElement type = config.get("model_type");
        return type != null && type.isJsonPrimitive() ? type.getAsString() : "";
    }

    /**
     * Returns the {@code tokenizer.json} of the checkpoint, if it has one.
     *
     * @return the tokenizer file, or empty
     */
    public Optional<Path> getTokenizerFile() {
        Path file = dir.resolve(TOKENIZER);
        return Files.isRegularFile(file) ? Optional.of(file) : Optional.empty();
    }

    /**
     * Returns the {@code tokenizer.json} of the checkpoint, or fails naming the file.
     *
     * @return the tokenizer file
     * @throws IOException if the checkpoint has no {@code tokenizer.json}
     */
    public Path requireTokenizerFile() throws IOException {
        return getTokenizerFile()
                .orElseThrow(
                        () ->
                                new IOException(
                                        dir.resolve(TOKENIZER)
                                                + ": missing (text input needs the checkpoint's"
                                                + " tokenizer.json)"));
    }

    /**
     * Returns the file the weights are described by: {@code model.safetensors.index.json} when the
     * checkpoint is sharded, else {@code model.safetensors}.
     *
     * @return the weights file
     */
    public Path getWeightsFile() {
        Path index = dir.resolve(WEIGHTS_INDEX);
        return Files.isRegularFile(index) ? index : dir.resolve(WEIGHTS);
    }

    /**
     * Opens the checkpoint's safetensors files (every shard) for reading one tensor at a time:
     * only their headers are read here.
     *
     * @return the open weights; close them to release the files
     * @throws IOException if a weights file is missing or its header is malformed
     */
    public CheckpointWeights openWeights() throws IOException {
        Path index = dir.resolve(WEIGHTS_INDEX);
        return CheckpointWeights.open(
                dir, index, Files.isRegularFile(index) ? readJson(index) : null);
    }

    /**
     * Reads every tensor of the checkpoint (all shards) into arrays of the manager. F32, F16, I32
     * and I64 keep their type; BF16 becomes float32 (DJL 0.36.0's PyTorch engine cannot hold
     * bfloat16 arrays). Loaders of large models read through {@link #openWeights} instead, one
     * tensor at a time into its final array.
     *
     * @param manager the manager the arrays attach to
     * @return the tensors by name
     * @throws IOException if a weights file is missing or malformed
     */
    public Map<String, NDArray> readTensors(NDManager manager) throws IOException {
        try (CheckpointWeights weights = openWeights()) {
            return weights.readAll(manager);
        }
    }

    /**
     * Returns a tensor the model needs, or fails naming the weights file and the tensor.
     *
     * @param tensors the tensors read by {@link #readTensors}
     * @param name the tensor's name
     * @return the tensor
     * @throws IOException if the checkpoint lacks it
     */
    public NDArray require(Map<String, NDArray> tensors, String name) throws IOException {
        NDArray t = tensors.get(name);
        if (t == null) {
            throw new IOException(getWeightsFile() + ": missing tensor " + name);
        }
        return t;
    }

    private static JsonObject readJson(Path file) throws IOException {
        try {
            JsonElement e = JsonParser.parseString(Files.readString(file, StandardCharsets.UTF_8));
            if (!e.isJsonObject()) {
                throw new IOException(file + ": expected a JSON object");
            }
            return e.getAsJsonObject();
        } catch (JsonParseException | IllegalStateException e) {
            throw new IOException(file + ": malformed JSON: " + e.getMessage(), e);
        }
    }
}
