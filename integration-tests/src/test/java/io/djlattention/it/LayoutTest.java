/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it;

import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The bars of the tree's layout (issue 27), checked on every build: no import cycle between the
 * packages of the main sources, and no main-source Java file over {@value #MAX_LINES} lines.
 *
 * <p>The packages are read from the compiled classes of every module this one depends on (all of
 * them), with ArchUnit; a package is a slice of its own, so {@code zoo.decoder ⇄ zoo.generate}
 * counts, not only cycles between top-level packages. The line count reads the sources of every
 * module, {@code examples/} included.
 */
class LayoutTest {

    static final int MAX_LINES = 800;

    @Test
    void noPackageCycleInMainSources() {
        JavaClasses classes =
                new ClassFileImporter()
                        .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
                        .importPackages("io.djlattention");
        // The import really saw the modules (an empty import would pass any rule).
        for (String pkg :
                List.of(
                        "io.djlattention",
                        "io.djlattention.paged",
                        "io.djlattention.zoo.decoder",
                        "io.djlattention.zoo.generate",
                        "io.djlattention.serving",
                        "io.djlattention.spark",
                        "io.djlattention.cli")) {
            assertTrue(classes.containPackage(pkg), "classes of " + pkg + " were not imported");
        }
        slices().assignedFrom(new PackageSlices()).should().beFreeOfCycles().check(classes);
    }

    @Test
    void noMainSourceFileOverTheBar() throws IOException {
        Path root = Path.of(System.getProperty("djl.attn.sourceRoot", "..")).toRealPath();
        Map<String, Long> over = new TreeMap<>();
        try (Stream<Path> files = Files.walk(root)) {
            for (Path file : files.filter(LayoutTest::isMainSource).collect(Collectors.toList())) {
                long lines = countLines(file);
                if (lines > MAX_LINES) {
                    over.put(root.relativize(file).toString(), lines);
                }
            }
        }
        assertEquals(Map.of(), over, "main-source files over " + MAX_LINES + " lines");
    }

    private static boolean isMainSource(Path file) {
        String path = file.toString().replace('\\', '/');
        return path.endsWith(".java")
                && path.contains("/src/main/java/")
                && !path.contains("/target/")
                && !path.contains("/.git/");
    }

    private static long countLines(Path file) {
        try (Stream<String> lines = Files.lines(file)) {
            return lines.count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** One slice per Java package, so nested packages count as packages of their own. */
    private static final class PackageSlices implements SliceAssignment {

        @Override
        public SliceIdentifier getIdentifierOf(JavaClass javaClass) {
            return SliceIdentifier.of(javaClass.getPackageName());
        }

        @Override
        public String getDescription() {
            return "packages of io.djlattention";
        }
    }
}
