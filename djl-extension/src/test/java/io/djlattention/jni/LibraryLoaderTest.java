/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.engine.EngineException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The loader's decisions: the library directory setting, libtorch's own view of CUDA, and the
 * message when a CUDA array meets a process without the CUDA operators.
 */
class LibraryLoaderTest {

    @TempDir Path temp;

    @AfterEach
    void clearProperty() {
        System.clearProperty(LibraryLoader.LIBRARY_PATH_PROPERTY);
    }

    @Test
    void libtorchCudaIsSeenInTheProcessMaps() throws IOException {
        Path maps = temp.resolve("maps");
        String cpu = "7f00-7f10 r-xp 00000000 08:01 42 /opt/libtorch/lib/libtorch_cpu.so\n";
        String cuda = "7f20-7f30 r-xp 00000000 08:01 43 /opt/libtorch/lib/libtorch_cuda.so\n";
        Files.writeString(maps, cpu + "7f40-7f50 rw-p 00000000 00:00 0 \n");
        assertEquals(Boolean.FALSE, LibraryLoader.libtorchCudaMapped(maps));
        Files.writeString(maps, cpu + cuda);
        assertEquals(Boolean.TRUE, LibraryLoader.libtorchCudaMapped(maps));
        assertNull(LibraryLoader.libtorchCudaMapped(temp.resolve("missing")));
    }

    @Test
    void thisProcessDecidesByItsOwnLibtorch() throws IOException {
        LibraryLoader.load();
        Path maps = Path.of("/proc/self/maps");
        if (Files.isReadable(maps)) {
            // Whatever libtorch this JVM runs with, the CUDA library is loaded exactly when it has
            // CUDA (and the build or the library directory provides one).
            List<String> lines = Files.readAllLines(maps);
            boolean torchCuda = lines.stream().anyMatch(l -> l.contains("/libtorch_cuda"));
            assertEquals(torchCuda, LibraryLoader.libtorchCudaMapped(maps));
            if (!torchCuda) {
                assertFalse(LibraryLoader.isCudaLoaded());
            }
        }
    }

    @Test
    void unsetOrBlankDirectoryMeansTheJars() {
        if (System.getenv(LibraryLoader.LIBRARY_PATH_ENV) == null) {
            assertNull(LibraryLoader.libraryDirectory());
            System.setProperty(LibraryLoader.LIBRARY_PATH_PROPERTY, "  ");
            assertNull(LibraryLoader.libraryDirectory());
        }
    }

    @Test
    void directoryMustExist() {
        Path missing = temp.resolve("no-such-dir");
        System.setProperty(LibraryLoader.LIBRARY_PATH_PROPERTY, missing.toString());
        EngineException e = assertThrows(EngineException.class, LibraryLoader::libraryDirectory);
        assertTrue(e.getMessage().startsWith(LibraryLoader.LIBRARY_PATH_PROPERTY), e.getMessage());
        assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
    }

    @Test
    void directoryMustHoldTheCpuLibrary() throws IOException {
        System.setProperty(LibraryLoader.LIBRARY_PATH_PROPERTY, temp.toString());
        EngineException e = assertThrows(EngineException.class, LibraryLoader::libraryDirectory);
        assertTrue(e.getMessage().contains("no libdjl_attn.so"), e.getMessage());

        Files.createFile(temp.resolve("libdjl_attn.so"));
        assertEquals(temp.toAbsolutePath().normalize(), LibraryLoader.libraryDirectory());
    }

    @Test
    void missingCudaKernelsNameTheFix() {
        LibraryLoader.load();
        String dispatcher =
                "Could not run 'djl_attn::flash_attention' with arguments from the 'CUDA'"
                        + " backend. This could be because the operator doesn't exist for this"
                        + " backend\nmore lines";
        String message = LibraryLoader.describeFailure("flash_attention", dispatcher);
        if (LibraryLoader.isCudaLoaded()) {
            assertEquals(dispatcher, message);
        } else {
            assertTrue(message.startsWith("flash_attention: a CUDA array"), message);
            assertTrue(message.contains("linux-x86_64-cu"), message);
            assertTrue(message.contains(LibraryLoader.LIBRARY_PATH_ENV), message);
            assertFalse(message.contains("more lines"), message);
        }
        // The bridge's own wording of a dispatcher failure: rewritten only when the loaded
        // libtorch has CUDA (then GPU arrays are the only way to get it without the CUDA library).
        String bridge =
                "djl_attn::flash_attention failed in PyTorch's dispatcher ("
                        + LibraryLoader.NO_KERNEL
                        + "); PyTorch logged the reason to stderr";
        String rewritten = LibraryLoader.describeFailure("flash_attention", bridge);
        boolean torchCuda =
                Boolean.TRUE.equals(LibraryLoader.libtorchCudaMapped(Path.of("/proc/self/maps")));
        if (LibraryLoader.isCudaLoaded() || !torchCuda) {
            assertEquals(bridge, rewritten);
        } else {
            assertTrue(rewritten.contains("linux-x86_64-cu"), rewritten);
        }
        String invalid = "q: expected 4 dims [B, Sq, Hq, D], got 3";
        assertEquals(invalid, LibraryLoader.describeFailure("flash_attention", invalid));
    }
}
