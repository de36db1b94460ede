/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.hf;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The open safetensors files of a checkpoint ({@code model.safetensors}, or the shards {@code
 * model.safetensors.index.json} names), read one tensor at a time ({@link SafetensorsFile}): only
 * the headers are read on opening; a tensor's data is read when a loader asks for it, straight
 * into the array that keeps it. Close it to release the file handles.
 *
 * <p>Errors name the checkpoint's weights file ({@link HfCheckpoint#getWeightsFile}) and the
 * tensor; a shard the index names that is absent, or a tensor the index places in a shard that
 * lacks it, fails on opening.
 */
public final class CheckpointWeights implements TensorSource, AutoCloseable {

    private final Path weightsFile;
    private final SafetensorsFile.Stage stage;
    private final List<SafetensorsFile> files;
    private final Map<String, SafetensorsFile> byTensor;

    private CheckpointWeights(
            Path weightsFile,
            SafetensorsFile.Stage stage,
            List<SafetensorsFile> files,
            Map<String, SafetensorsFile> byTensor) {
        this.weightsFile = weightsFile;
        this.stage = stage;
        this.files = files;
        this.byTensor = byTensor;
    }

    static CheckpointWeights open(Path dir, Path index, JsonObject indexJson) throws IOException {
        List<SafetensorsFile> files = new ArrayList<>();
        Map<String, SafetensorsFile> byTensor = new LinkedHashMap<>();
        SafetensorsFile.Stage stage = new SafetensorsFile.Stage();
        try {
            if (indexJson == null) {
                Path single = dir.resolve(HfCheckpoint.WEIGHTS);
                if (!Files.isRegularFile(single)) {
                    throw new IOException(
                            single
                                    + ": missing (and no "
                                    + HfCheckpoint.WEIGHTS_INDEX
                                    + " for sharded weights)");
                }
                SafetensorsFile f = SafetensorsFile.open(single, stage);
                files.add(f);
                for (String name : f.getEntries().keySet()) {
                    byTensor.put(name, f);
                }
                return new CheckpointWeights(single, stage, files, byTensor);
            }
            JsonElement map = indexJson.get("weight_map");
            if (map == null || !map.isJsonObject()) {
                throw new IOException(index + ": no weight_map object");
            }
            TreeSet<String> shards = new TreeSet<>();
            for (Map.Entry<String, JsonElement> e : map.getAsJsonObject().entrySet()) {
                shards.add(e.getValue().getAsString());
            }
            Map<String, SafetensorsFile> byShard = new LinkedHashMap<>();
            for (String shard : shards) {
                Path file = dir.resolve(shard).normalize();
                if (!file.startsWith(dir.normalize()) || !Files.isRegularFile(file)) {
                    throw new IOException(file + ": shard named by " + index + " is missing");
                }
                SafetensorsFile f = SafetensorsFile.open(file, stage);
                files.add(f);
                byShard.put(shard, f);
            }
            for (Map.Entry<String, JsonElement> e : map.getAsJsonObject().entrySet()) {
                SafetensorsFile f = byShard.get(e.getValue().getAsString());
                if (!f.getEntries().containsKey(e.getKey())) {
                    throw new IOException(
                            index
                                    + ": tensor "
                                    + e.getKey()
                                    + " is placed in "
                                    + f.getFile()
                                    + ", which lacks it");
                }
                byTensor.put(e.getKey(), f);
            }
            return new CheckpointWeights(index, stage, files, byTensor);
        } catch (IOException | RuntimeException e) {
            for (SafetensorsFile f : files) {
                f.close();
            }
            stage.close();
            throw e;
        }
    }

    /**
     * Returns the names of every tensor, in index (or file) order.
     *
     * @return the names (unmodifiable)
     */
    public Set<String> names() {
        return Collections.unmodifiableSet(byTensor.keySet());
    }

    /**
     * Returns whether the checkpoint has a tensor.
     *
     * @param name the name
     * @return true if present
     */
    public boolean contains(String name) {
        return byTensor.containsKey(name);
    }

    /**
     * Returns a tensor's header entry (dtype, shape, size).
     *
     * @param name the tensor's name
     * @return the entry
     * @throws IOException if the checkpoint lacks the tensor
     */
    public SafetensorsFile.Entry entry(String name) throws IOException {
        return file(name).getEntries().get(name);
    }

    /** {@inheritDoc} */
    @Override
    public Shape shape(String name) throws IOException {
        return entry(name).getShape();
    }

    /** {@inheritDoc} */
    @Override
    public void readInto(String name, NDArray destination) throws IOException {
        file(name).readInto(name, destination);
    }

    /**
     * Reads one tensor into a new array on the manager's device ({@link SafetensorsFile#read}).
     *
     * @param name the tensor's name
     * @param manager the manager that will own the array
     * @param dataType float32 or float16 for floating-point tensors, the stored type for integers
     * @return the array
     * @throws IOException if the checkpoint lacks the tensor or it cannot be read as {@code
     *     dataType}
     */
    public NDArray read(String name, NDManager manager, DataType dataType) throws IOException {
        return file(name).read(name, manager, dataType);
    }

    /**
     * Reads every tensor: F32, F16, I32 and I64 keep their type, BF16 becomes float32 (DJL 0.36.0's
     * PyTorch engine cannot hold bfloat16 arrays).
     *
     * @param manager the manager the arrays attach to
     * @return the tensors by name
     * @throws IOException if a tensor cannot be read
     */
    public Map<String, NDArray> readAll(NDManager manager) throws IOException {
        Map<String, NDArray> tensors = new LinkedHashMap<>();
        for (String name : byTensor.keySet()) {
            DataType type = SafetensorsFile.keptType(entry(name).getDtype());
            tensors.put(name, read(name, manager, type));
        }
        return tensors;
    }

    private SafetensorsFile file(String name) throws IOException {
        SafetensorsFile f = byTensor.get(name);
        if (f == null) {
            throw new IOException(weightsFile + ": missing tensor " + name);
        }
        return f;
    }

    /** Closes every file and frees the staging buffers. Closing twice is harmless. */
    @Override
    public void close() throws IOException {
        stage.close();
        IOException first = null;
        for (SafetensorsFile f : files) {
            try {
                f.close();
            } catch (IOException e) {
                if (first == null) {
                    first = e;
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
