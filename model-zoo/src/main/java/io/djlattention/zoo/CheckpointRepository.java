/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.repository.Artifact;
import ai.djl.repository.MRL;
import ai.djl.repository.Metadata;
import ai.djl.repository.SimpleRepository;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Path;
import java.util.Map;

/**
 * A local repository of one checkpoint of this zoo. DJL loads every model URL and path through
 * its {@code BaseModelLoader}, which builds an engine model, a block and a translator from the
 * artifact's arguments; this repository gives the artifact the arguments that route the load to
 * {@link CheckpointLoader} ({@link DelegatingTranslatorFactory}, an empty block, no parameter
 * file).
 */
final class CheckpointRepository extends SimpleRepository {

    private final Map<String, Object> routing;

    /**
     * Creates the repository.
     *
     * @param name the repository name
     * @param uri the URI the user gave
     * @param path the checkpoint (or, for a built-in model, an empty marker directory)
     * @param routing {@link #ARG_PATH} or {@link #ARG_BUILTIN}
     */
    CheckpointRepository(String name, URI uri, Path path, Map<String, Object> routing) {
        super(name, uri, path);
        this.routing = routing;
    }

    /** {@inheritDoc} */
    @Override
    public Metadata locate(MRL mrl) throws IOException {
        Metadata metadata = super.locate(mrl);
        for (Artifact artifact : metadata.getArtifacts()) {
            Map<String, Object> args = artifact.getArguments();
            args.putAll(routing);
            args.put("engine", "PyTorch");
            args.put("translatorFactory", DelegatingTranslatorFactory.class.getName());
            // An instance, not a class name: DJL would otherwise search the model directory's
            // jars for the class.
            args.put("blockFactory", new EmptyBlockFactory());
            Map<String, String> options = artifact.getOptions(null);
            // The engine model stays empty: the delegate model holds the weights.
            options.put("hasParameter", "false");
            artifact.setOptions(options);
        }
        return metadata;
    }
}
