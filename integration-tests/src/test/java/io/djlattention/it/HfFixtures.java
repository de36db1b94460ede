/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * The reference checkpoints {@code src/test/python/make_fixtures.sh} writes before the tests run
 * (Maven phase generate-test-resources), found through the system property {@code
 * djl.attn.hfFixtures}. A missing fixture fails the test: it never skips.
 */
public final class HfFixtures {

    private HfFixtures() {}

    /**
     * Returns the output folder of one fixture script ({@code make_NAME.py}).
     *
     * @param name the script's name without {@code make_} and {@code .py}
     * @return the folder
     */
    public static Path dir(String name) {
        String root = System.getProperty("djl.attn.hfFixtures");
        if (root == null) {
            fail(
                    "system property djl.attn.hfFixtures is not set: run the tests through Maven"
                            + " (mvn verify), which writes the fixtures with"
                            + " integration-tests/src/test/python/make_fixtures.sh");
        }
        Path dir = Paths.get(root, name);
        if (!Files.isRegularFile(dir.resolve(".done"))) {
            fail(
                    dir
                            + " is missing: the Hugging Face reference fixtures are made by"
                            + " bash integration-tests/src/test/python/make_fixtures.sh "
                            + root
                            + " (needs python3; it installs torch 2.13 CPU and transformers into"
                            + " .venv through native-ops/scripts/python-env.sh)");
        }
        return dir;
    }
}
