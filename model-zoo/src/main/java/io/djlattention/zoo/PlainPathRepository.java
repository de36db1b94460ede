/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.repository.MRL;
import ai.djl.repository.Metadata;
import ai.djl.repository.SimpleRepository;
import ai.djl.repository.zoo.DefaultModelZoo;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * DJL's own repository of a local path that this zoo does not claim, except that locating a
 * model in it names what is wrong where DJL's would match nothing: a path that does not exist,
 * or a file of a Hugging Face checkpoint directory given instead of the directory. DJL then ends
 * {@code Criteria.loadModel()} in a generic {@code ModelNotFoundException} without the path.
 *
 * <p>Only model loading sees the difference, and only where DJL would find no model: a missing
 * path still lists one model ({@link #getResources}, which DJL's lists none for), so that {@code
 * Criteria.loadModel()} reaches {@link #locate}, which names the path. Every other use of the
 * repository (datasets, a directory filled later) behaves as DJL's.
 */
final class PlainPathRepository extends SimpleRepository {

    private final Path path;

    PlainPathRepository(String name, URI uri, Path path) {
        super(name, uri, path);
        this.path = path;
    }

    /** {@inheritDoc} */
    @Override
    public List<MRL> getResources() {
        if (Files.exists(path)) {
            return super.getResources();
        }
        // DJL's lists nothing here, and Criteria then fails without naming the path.
        return List.of(MRL.undefined(this, DefaultModelZoo.GROUP_ID, artifactId(path)));
    }

    /**
     * {@inheritDoc}
     *
     * @throws FileNotFoundException if the path does not exist, or is a file of a Hugging Face
     *     checkpoint directory (the message names the path, and the directory to pass instead)
     */
    @Override
    public Metadata locate(MRL mrl) throws IOException {
        String wrong = CheckpointLoader.whyNotAModel(path);
        if (wrong != null) {
            throw new FileNotFoundException(wrong);
        }
        return super.locate(mrl);
    }

    private static String artifactId(Path path) {
        Path name = path.getFileName();
        return name == null ? path.toString() : name.toString();
    }
}
