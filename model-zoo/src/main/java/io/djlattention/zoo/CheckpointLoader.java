/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.MalformedModelException;
import ai.djl.ndarray.types.DataType;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;

import io.djlattention.zoo.decoder.HfDecoderLoader;
import io.djlattention.zoo.decoder.Llama2cLoader;
import io.djlattention.zoo.encoder.EncoderModels;
import io.djlattention.zoo.hf.HfCheckpoint;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * Decides which loader a checkpoint belongs to and calls it: {@link EncoderModels} for BERT
 * encoders, {@link DecoderModels} for LLaMA, Mistral, Gemma-2, GPT-2 and llama2.c decoders.
 *
 * <p>A Hugging Face directory is dispatched on the first entry of {@code architectures} in its
 * {@code config.json}:
 *
 * <ul>
 *   <li>{@code BertModel}, {@code BertForMaskedLM} (or no {@code architectures} and {@code
 *       model_type} {@code bert}): encoder;
 *   <li>{@link HfDecoderLoader#ARCHITECTURES} ({@code LlamaForCausalLM}, {@code
 *       MistralForCausalLM}, {@code Gemma2ForCausalLM}, {@code GPT2LMHeadModel}): decoder;
 *   <li>anything else: {@link MalformedModelException} naming {@code config.json} and the
 *       architecture.
 * </ul>
 *
 * A regular file is read as a llama2.c checkpoint (decoder).
 */
public final class CheckpointLoader {

    /** The {@code architectures} entries that load as BERT encoders. */
    public static final List<String> ENCODER_ARCHITECTURES =
            List.of("BertModel", "BertForMaskedLM");
    /** The {@code architectures} entries that load as decoders. */
    public static final List<String> DECODER_ARCHITECTURES = HfDecoderLoader.ARCHITECTURES;

    /** The families a checkpoint can belong to. */
    public enum Family {
        /** A BERT-architecture encoder ({@link EncoderModels}). */
        ENCODER,
        /** A causal decoder ({@link DecoderModels}). */
        DECODER
    }

    /** Files that mark a directory as some other engine's model, which this zoo leaves to DJL. */
    private static final List<String> FOREIGN_SUFFIXES =
            List.of(".pt", ".onnx", ".params", ".pb", ".tflite", ".zip", ".tar.gz", ".engine");

    /** What a local model path must be, as the error messages say it. */
    static final String EXPECTED =
            "a Hugging Face checkpoint directory (config.json, model.safetensors, and"
                    + " tokenizer.json for text input) or a llama2.c .bin file";

    private CheckpointLoader() {}

    /**
     * Loads a local checkpoint as a model of the criteria's input and output types.
     *
     * @param checkpoint a Hugging Face checkpoint directory or a llama2.c checkpoint file
     * @param criteria the criteria (types, device, arguments); its model URL or path is not read
     * @param <I> the input type
     * @param <O> the output type
     * @return the model
     * @throws ModelNotFoundException if the checkpoint's family has no task of the criteria's
     *     types
     * @throws MalformedModelException if the architecture is not supported or a tensor is missing
     * @throws IOException if {@code config.json} or another file is missing or unreadable
     */
    public static <I, O> ZooModel<I, O> load(Path checkpoint, Criteria<I, O> criteria)
            throws IOException, ModelNotFoundException, MalformedModelException {
        if (checkpoint == null) {
            throw new IllegalArgumentException("checkpoint: must not be null");
        }
        switch (familyOf(checkpoint)) {
            case ENCODER:
                return EncoderModels.load(checkpoint, criteria);
            case DECODER:
                return DecoderModels.load(checkpoint, criteria);
            default:
                throw new AssertionError("unreachable");
        }
    }

    /**
     * Loads a built-in model of {@link DjlAttentionModelZoo}.
     *
     * @param artifactId {@link DjlAttentionModelZoo#MINILM} or {@link DjlAttentionModelZoo#STORIES}
     * @param criteria the criteria (types, device, arguments)
     * @param <I> the input type
     * @param <O> the output type
     * @return the model
     * @throws ModelNotFoundException if the artifact is unknown or has no task of the criteria's
     *     types
     * @throws MalformedModelException if the built-in weights are malformed
     * @throws IOException if the built-in weights cannot be read
     */
    public static <I, O> ZooModel<I, O> loadBuiltin(String artifactId, Criteria<I, O> criteria)
            throws IOException, ModelNotFoundException, MalformedModelException {
        if (DjlAttentionModelZoo.MINILM.equals(artifactId)) {
            return EncoderModels.load(null, criteria);
        }
        if (DjlAttentionModelZoo.STORIES.equals(artifactId)) {
            return DecoderModels.load(null, criteria);
        }
        throw new ModelNotFoundException(
                DjlAttentionModelZoo.GROUP_ID
                        + ": no built-in model "
                        + artifactId
                        + " (the zoo has "
                        + DjlAttentionModelZoo.MINILM
                        + " and "
                        + DjlAttentionModelZoo.STORIES
                        + ")");
    }

    /**
     * Returns the family of a checkpoint, reading only {@code config.json} (or a llama2.c header).
     *
     * @param checkpoint a Hugging Face checkpoint directory or a llama2.c checkpoint file
     * @return the family
     * @throws MalformedModelException if {@code config.json} names an unsupported architecture
     * @throws IOException if the path does not exist, is an empty directory or a file of a
     *     Hugging Face checkpoint directory ({@link FileNotFoundException}, naming the path),
     *     {@code config.json} is missing or malformed, or a file is not a llama2.c checkpoint
     */
    public static Family familyOf(Path checkpoint) throws IOException, MalformedModelException {
        String wrong = whyNotAModel(checkpoint);
        if (wrong != null) {
            throw new FileNotFoundException(wrong);
        }
        if (isEmptyDirectory(checkpoint)) {
            throw new FileNotFoundException(
                    checkpoint.toAbsolutePath() + ": empty directory (expected " + EXPECTED + ")");
        }
        if (Files.isRegularFile(checkpoint)) {
            // Reads and checks the header: a file that is no llama2.c checkpoint fails here.
            Llama2cLoader.readConfig(checkpoint, DataType.FLOAT32);
            return Family.DECODER;
        }
        HfCheckpoint hf = HfCheckpoint.open(checkpoint);
        String arch = hf.getArchitecture();
        // Without architectures, HfCheckpoint falls back on model_type; the BERT loader accepts
        // model_type "bert" too.
        if (ENCODER_ARCHITECTURES.contains(arch) || "bert".equals(arch)) {
            return Family.ENCODER;
        }
        if (DECODER_ARCHITECTURES.contains(arch)) {
            return Family.DECODER;
        }
        throw new MalformedModelException(
                checkpoint.resolve("config.json")
                        + ": architecture "
                        + (arch.isEmpty() ? "(none: no architectures or model_type)" : arch)
                        + " is not supported; supported are "
                        + ENCODER_ARCHITECTURES
                        + " (encoders) and "
                        + DECODER_ARCHITECTURES
                        + " (decoders), and llama2.c .bin files");
    }

    /**
     * Says why a local path cannot be a model for any loader, DJL's or this zoo's: it does not
     * exist, or it is a file of a Hugging Face checkpoint directory (such as its {@code
     * config.json}) where the directory was meant.
     *
     * @param path the path given to {@code Criteria.optModelPath} (or as a {@code file:} URL)
     * @return a message naming the path and what to give instead, or null when neither holds
     */
    public static String whyNotAModel(Path path) {
        Path absolute = path.toAbsolutePath();
        if (!Files.exists(absolute)) {
            return absolute
                    + ": no such file or directory (expected "
                    + EXPECTED
                    + ", or another DJL engine's model)";
        }
        Path parent = absolute.getParent();
        if (Files.isRegularFile(absolute)
                && parent != null
                && !isCheckpoint(absolute)
                && isCheckpoint(parent)) {
            return absolute
                    + ": a file of the Hugging Face checkpoint directory "
                    + parent
                    + "; give the directory instead (optModelPath(Paths.get(\""
                    + parent
                    + "\")))";
        }
        return null;
    }

    /**
     * Whether a path is a directory with nothing in it.
     *
     * @param path the path
     * @return whether it is an empty directory (false when it cannot be listed)
     */
    static boolean isEmptyDirectory(Path path) {
        if (!Files.isDirectory(path)) {
            return false;
        }
        try (Stream<Path> files = Files.list(path)) {
            return files.findAny().isEmpty();
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * Whether a path given to {@code Criteria.optModelPath} is one this zoo loads rather than DJL's
     * own local repositories: a llama2.c {@code .bin} file, or a directory with {@code
     * config.json}, {@code tokenizer.json} or safetensors weights and none of the files other DJL
     * engines load ({@code serving.properties}, {@code .pt}, {@code .onnx}, {@code .params}, ...).
     * It reads no more than a directory listing and a llama2.c header.
     *
     * @param path the path
     * @return whether this zoo claims it
     */
    public static boolean isCheckpoint(Path path) {
        if (Files.isRegularFile(path)) {
            String name = path.getFileName().toString().toLowerCase(Locale.ROOT);
            if (!name.endsWith(".bin") || name.equals("pytorch_model.bin")) {
                return false;
            }
            try {
                Llama2cLoader.readConfig(path, DataType.FLOAT32);
                return true;
            } catch (IOException | RuntimeException e) {
                return false;
            }
        }
        if (!Files.isDirectory(path)) {
            return false;
        }
        boolean hf = false;
        try (Stream<Path> files = Files.list(path)) {
            for (Path f : (Iterable<Path>) files::iterator) {
                String name = f.getFileName().toString().toLowerCase(Locale.ROOT);
                if (name.equals("serving.properties")
                        || FOREIGN_SUFFIXES.stream().anyMatch(name::endsWith)) {
                    return false;
                }
                hf |=
                        name.equals("config.json")
                                || name.equals(HfCheckpoint.TOKENIZER)
                                || name.endsWith(".safetensors")
                                || name.equals(HfCheckpoint.WEIGHTS_INDEX);
            }
        } catch (IOException e) {
            return false;
        }
        return hf;
    }
}
