/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.Application;
import ai.djl.MalformedModelException;
import ai.djl.repository.MRL;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelLoader;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.util.Progress;

import java.io.IOException;

/**
 * Loads one built-in model of {@link DjlAttentionModelZoo}. The weights ship inside the jars, so
 * there is nothing to download: {@link #isDownloaded} is always true.
 */
final class BuiltinModelLoader implements ModelLoader {

    private final String groupId;
    private final String artifactId;
    private final Application application;
    private final MRL mrl;

    BuiltinModelLoader(String groupId, String artifactId, Application application) {
        this.groupId = groupId;
        this.artifactId = artifactId;
        this.application = application;
        this.mrl =
                MRL.model(
                        DjlAttentionRepositoryFactory.builtinRepository(artifactId),
                        application,
                        groupId,
                        artifactId,
                        null,
                        artifactId);
    }

    /** {@inheritDoc} */
    @Override
    public String getGroupId() {
        return groupId;
    }

    /** {@inheritDoc} */
    @Override
    public String getArtifactId() {
        return artifactId;
    }

    /** {@inheritDoc} */
    @Override
    public Application getApplication() {
        return application;
    }

    /** {@inheritDoc} */
    @Override
    public MRL getMrl() {
        return mrl;
    }

    /** {@inheritDoc} */
    @Override
    public <I, O> ZooModel<I, O> loadModel(Criteria<I, O> criteria)
            throws IOException, ModelNotFoundException, MalformedModelException {
        return CheckpointLoader.loadBuiltin(artifactId, criteria);
    }

    /** {@inheritDoc} */
    @Override
    public <I, O> boolean isDownloaded(Criteria<I, O> criteria) {
        return true;
    }

    /** {@inheritDoc} */
    @Override
    public <I, O> void downloadModel(Criteria<I, O> criteria, Progress progress) {
        // built in: nothing to download
    }

    /** {@inheritDoc} */
    @Override
    public String toString() {
        return groupId + ':' + artifactId + " (" + application + ", built in)";
    }
}
