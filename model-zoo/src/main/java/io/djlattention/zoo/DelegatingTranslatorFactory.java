/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.Application;
import ai.djl.MalformedModelException;
import ai.djl.Model;
import ai.djl.modality.Classifications;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.translate.TranslateException;
import ai.djl.translate.Translator;
import ai.djl.translate.TranslatorFactory;
import ai.djl.util.Pair;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.Type;
import java.nio.file.Paths;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

/**
 * The translator factory a {@link CheckpointRepository} names: it loads the real model through
 * {@link CheckpointLoader} (with the criteria's types, the engine model's device and the
 * criteria's arguments) and returns a {@link DelegatingTranslator} that predicts with it. The
 * delegate closes with the model DJL returns.
 *
 * <p>Errors: a checkpoint that does not load (an empty directory, missing {@code config.json} or
 * {@code tokenizer.json}, unsupported architecture, missing tensor, unknown argument) throws
 * {@link UncheckedIOException} or {@link IllegalArgumentException} with the loader's message
 * straight out of {@code Criteria.loadModel()}; types the checkpoint has no task for end in DJL's
 * usual {@code ModelNotFoundException} with the loader's message as its cause (docs/model-zoo.md,
 * "Every error a load can raise").
 */
public final class DelegatingTranslatorFactory implements TranslatorFactory {

    /**
     * The artifact argument holding the checkpoint path: {@link DjlAttentionRepositoryFactory}
     * puts it in a {@link CheckpointRepository}'s routing, this factory reads it.
     */
    static final String ARG_PATH = "djlAttention.checkpoint";
    /** The artifact argument holding a built-in model's artifact id. */
    static final String ARG_BUILTIN = "djlAttention.builtin";

    /**
     * Arguments the repository adds for DJL's loader, and DJL's own repository arguments of a
     * URL's query ({@code model_name}, {@code artifact_id}), not passed on to the delegate: the
     * loaders refuse arguments they do not read.
     */
    private static final Set<String> INTERNAL =
            Set.of(
                    ARG_PATH,
                    ARG_BUILTIN,
                    "translatorFactory",
                    "blockFactory",
                    "engine",
                    "application",
                    "model_name",
                    "artifact_id");

    /** {@inheritDoc} */
    @Override
    public Set<Pair<Type, Type>> getSupportedTypes() {
        // The tasks of the built-in models; a checkpoint's loader has the last word (isSupported).
        return Set.of(
                new Pair<>(String.class, float[].class),
                new Pair<>(String.class, Classifications.class),
                new Pair<>(String.class, String.class),
                new Pair<>(int[].class, int[].class));
    }

    /**
     * Returns true: which types a checkpoint serves depends on the checkpoint, and its loader
     * refuses the others with a message naming them.
     *
     * @param input the input class
     * @param output the output class
     * @return true
     */
    @Override
    public boolean isSupported(Class<?> input, Class<?> output) {
        return true;
    }

    /** {@inheritDoc} */
    @Override
    public <I, O> Translator<I, O> newInstance(
            Class<I> input, Class<O> output, Model model, Map<String, ?> arguments)
            throws TranslateException {
        Criteria.Builder<I, O> builder =
                Criteria.builder()
                        .setTypes(input, output)
                        .optEngine("PyTorch")
                        .optDevice(model.getNDManager().getDevice());
        for (Map.Entry<String, ?> e : arguments.entrySet()) {
            if (!INTERNAL.contains(e.getKey())) {
                builder.optArgument(e.getKey(), e.getValue());
            }
        }
        Object application = arguments.get("application");
        if (application != null) {
            builder.optApplication(Application.of(application.toString()));
        }
        Criteria<I, O> criteria = builder.build();
        Object builtin = arguments.get(ARG_BUILTIN);
        Object path = arguments.get(ARG_PATH);
        ZooModel<I, O> delegate;
        try {
            delegate =
                    builtin != null
                            ? CheckpointLoader.loadBuiltin(builtin.toString(), criteria)
                            : CheckpointLoader.load(Paths.get(path.toString()), criteria);
        } catch (ModelNotFoundException e) {
            model.close(); // DJL's loader does not close the engine model it built
            throw new TranslateException(e.getMessage(), e);
        } catch (MalformedModelException e) {
            model.close();
            throw new IllegalArgumentException(e.getMessage(), e);
        } catch (IOException e) {
            model.close();
            throw new UncheckedIOException(e.getMessage(), e);
        } catch (RuntimeException e) {
            model.close();
            throw e;
        }
        model.getNDManager().attachInternal("djl-attention-delegate-" + UUID.randomUUID(), delegate);
        return new DelegatingTranslator<>(delegate);
    }
}
