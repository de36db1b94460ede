/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.Model;
import ai.djl.nn.Block;
import ai.djl.nn.BlockFactory;
import ai.djl.nn.LambdaBlock;

import java.nio.file.Path;
import java.util.Map;

/**
 * The block of the engine model DJL builds around a delegated load: never run ({@link
 * DelegatingTranslator} hands DJL an empty input, which its predictor does not forward), it only
 * tells the engine not to look for a TorchScript file.
 */
public final class EmptyBlockFactory implements BlockFactory {

    private static final long serialVersionUID = 1L;

    /** {@inheritDoc} */
    @Override
    public Block newBlock(Model model, Path modelPath, Map<String, ?> arguments) {
        return new LambdaBlock(x -> x);
    }
}
