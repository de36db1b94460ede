/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import java.util.concurrent.Callable;

import picocli.CommandLine.Command;

/** {@code serve}: the OpenAI-compatible HTTP server (docs/serving.md). */
@Command(name = "serve", mixinStandardHelpOptions = true, description = "Serve the models over HTTP.")
public final class ServeCommand implements Callable<Integer> {

    @Override
    public Integer call() {
        throw new UnsupportedOperationException("serve: not implemented yet");
    }
}
