/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.paged;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Assumptions;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/** Files under ../shared, found through the system property {@code djl.attn.shared}. */
final class SharedFiles {

    private SharedFiles() {}

    /**
     * Returns a shared file; skips the test when it is absent, except under {@code CI=true}, where
     * absence fails it.
     */
    static Path require(String relative) {
        Path root = Paths.get(System.getProperty("djl.attn.shared", "../shared"));
        Path file = root.resolve(relative);
        String message =
                file.toAbsolutePath()
                        + " is absent (set -Ddjl.attn.shared to the directory holding"
                        + " models/stories260K)";
        if (!Files.isRegularFile(file)) {
            if ("true".equals(System.getenv("CI"))) {
                assertTrue(false, message);
            }
            Assumptions.abort(message + ": skipping");
        }
        return file;
    }
}
