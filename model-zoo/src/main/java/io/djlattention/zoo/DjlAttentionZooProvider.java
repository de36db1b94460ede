/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.repository.zoo.ModelZoo;
import ai.djl.repository.zoo.ZooProvider;

/**
 * Registers {@link DjlAttentionModelZoo} with DJL (through {@code
 * META-INF/services/ai.djl.repository.zoo.ZooProvider}), so that {@code ModelZoo.getModelZoo(
 * "io.djlattention")} and {@code Criteria.optGroupId("io.djlattention")} find it.
 */
public final class DjlAttentionZooProvider implements ZooProvider {

    /** {@inheritDoc} */
    @Override
    public ModelZoo getModelZoo() {
        return new DjlAttentionModelZoo();
    }
}
