/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.jni;

import ai.djl.engine.Engine;
import ai.djl.engine.EngineException;
import java.io.File;
import java.io.IOException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import org.bytedeco.javacpp.Loader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads the operator libraries into the process, once.
 *
 * <p>Order matters: the PyTorch engine is initialised first, because {@code libdjl_attn.so}
 * resolves PyTorch's stable C functions from the libtorch that DJL loaded and registers its
 * operators with it when it is loaded. JavaCPP then extracts the libraries from the jar (to its
 * cache) and loads them. A second call does nothing, and a second copy of the library in the
 * process registers nothing.
 *
 * <p><b>Where the libraries come from.</b> By default from the class path: {@code libdjl_attn.so}
 * from the {@code djl-attention-native} jar, {@code libdjl_attn_cuda.so} from its {@code
 * linux-x86_64-cu} classifier jar. The system property {@value #LIBRARY_PATH_PROPERTY} or, when it
 * is unset, the environment variable {@value #LIBRARY_PATH_ENV} names a directory that takes
 * precedence: its {@code libdjl_attn.so} and {@code libdjl_attn_cuda.so} (for example the output
 * of the CMake build of {@code native-ops} on the machine that runs the code) are loaded instead
 * of the jars' copies. A directory that does not exist or lacks {@code libdjl_attn.so} is an
 * error, never silently ignored.
 *
 * <p><b>When the CUDA library is loaded.</b> Whenever the libtorch that DJL loaded has CUDA, that
 * is, when {@code libtorch_cuda.so} is mapped into the process (libtorch's own view, read from
 * {@code /proc/self/maps}; DJL's GPU count, a separate check through the CUDA runtime, is used
 * only where {@code /proc} does not exist). A CPU libtorch never loads it: its operators would
 * have no CUDA dispatch key to register with.
 */
public final class LibraryLoader {

    /** System property naming a directory of native libraries that overrides the jars. */
    public static final String LIBRARY_PATH_PROPERTY = "djl.attn.library.path";

    /** Environment variable read when {@value #LIBRARY_PATH_PROPERTY} is unset. */
    public static final String LIBRARY_PATH_ENV = "DJL_ATTN_LIBRARY_PATH";

    private static final Logger logger = LoggerFactory.getLogger(LibraryLoader.class);
    private static final String CPU_LIBRARY = "libdjl_attn.so";
    private static final String CUDA_LIBRARY = "libdjl_attn_cuda.so";
    /** How djl_attn_call reports a dispatcher failure (no kernel for the tensors' device). */
    static final String NO_KERNEL = "no kernel for these tensors' device";

    private static volatile boolean loaded;
    private static volatile boolean cudaLoaded;
    private static volatile boolean torchHasCuda;

    private LibraryLoader() {}

    /**
     * Loads the libraries if this process has not loaded them yet.
     *
     * @throws EngineException if the PyTorch engine or the libraries cannot be loaded, or if the
     *     directory named by {@value #LIBRARY_PATH_PROPERTY} / {@value #LIBRARY_PATH_ENV} is
     *     unusable
     */
    public static void load() {
        if (loaded) {
            return;
        }
        synchronized (LibraryLoader.class) {
            if (loaded) {
                return;
            }
            Engine engine = Engine.getEngine("PyTorch");
            Path directory = libraryDirectory();
            if (directory != null) {
                // Loaded through JavaCPP under the link name "djl_attn": JavaCPP then skips the
                // jar's copy, and the JNI library links this one by its soname.
                loadLinkLibrary(directory.resolve(CPU_LIBRARY));
            }
            try {
                Loader.load(DjlAttnLibrary.class);
            } catch (UnsatisfiedLinkError e) {
                throw new EngineException("Failed to load libdjl_attn.so: " + e.getMessage(), e);
            }
            if (DjlAttnLibrary.registrationStatus() != DjlAttnLibrary.OK) {
                throw new EngineException(
                        "djl_attn operators are not registered: "
                                + DjlAttnLibrary.registrationMessage());
            }
            // The kernels' thread count is left unset: the library then follows libtorch's
            // intra-op setting at every call (JniUtils.setNumThreads after loading included).
            Boolean mapped = libtorchCudaMapped(Paths.get("/proc/self/maps"));
            torchHasCuda = mapped != null ? mapped : engine.getGpuCount() > 0;
            if (torchHasCuda) {
                loadCudaLibrary(directory);
            }
            loaded = true;
        }
    }

    /**
     * Returns whether the CUDA operators were loaded.
     *
     * @return {@code true} once {@code libdjl_attn_cuda.so} is loaded
     */
    public static boolean isCudaLoaded() {
        return cudaLoaded;
    }

    /**
     * Turns a native failure message into the message the caller sees: when the message is the
     * dispatcher's "no kernel for the CUDA backend" (a CUDA array met a process without the CUDA
     * operators), it names the fix; any other message is returned unchanged.
     *
     * @param operator the operator name, for example {@code flash_attention}
     * @param nativeMessage the message of the native failure
     * @return the message to throw with
     */
    public static String describeFailure(String operator, String nativeMessage) {
        if (cudaLoaded || nativeMessage == null) {
            return nativeMessage;
        }
        // PyTorch's own text names the backend; the bridge's (which keeps PyTorch's text off the
        // message) says only that no kernel exists for the tensors' device, which with a CUDA
        // libtorch and no CUDA operators loaded means GPU arrays.
        boolean cudaBackend = nativeMessage.contains("'CUDA' backend");
        boolean noKernel = torchHasCuda && nativeMessage.contains(NO_KERNEL);
        if (!cudaBackend && !noKernel) {
            return nativeMessage;
        }
        String why =
                torchHasCuda
                        ? "no " + CUDA_LIBRARY + " was found (neither in the directory named by "
                                + LIBRARY_PATH_PROPERTY + " / " + LIBRARY_PATH_ENV
                                + " nor on the class path)"
                        : "the CUDA library was not loaded because the loaded libtorch has no"
                                + " CUDA (libtorch_cuda.so is not in the process)";
        return operator
                + ": a CUDA array was passed but djl-attention's CUDA operators are not loaded: "
                + why
                + ". Add the dependency io.djlattention:djl-attention-native with classifier"
                + " linux-x86_64-cu, or set " + LIBRARY_PATH_PROPERTY + " / " + LIBRARY_PATH_ENV
                + " to a directory holding " + CUDA_LIBRARY + " (see the README, \"GPU\")."
                + " Native message: " + firstLine(nativeMessage);
    }

    /**
     * Reads the library directory from {@value #LIBRARY_PATH_PROPERTY}, then {@value
     * #LIBRARY_PATH_ENV}.
     *
     * @return the directory, or {@code null} when neither is set (or both are blank)
     * @throws EngineException if the directory does not exist or has no {@code libdjl_attn.so}
     */
    static Path libraryDirectory() {
        String value = System.getProperty(LIBRARY_PATH_PROPERTY);
        String source = LIBRARY_PATH_PROPERTY;
        if (value == null || value.isBlank()) {
            value = System.getenv(LIBRARY_PATH_ENV);
            source = LIBRARY_PATH_ENV;
        }
        if (value == null || value.isBlank()) {
            return null;
        }
        Path directory = Paths.get(value.trim()).toAbsolutePath().normalize();
        if (!Files.isDirectory(directory)) {
            throw new EngineException(
                    source + ": expected a directory of djl-attention native libraries, got "
                            + directory + ", which is not a directory");
        }
        if (!Files.isRegularFile(directory.resolve(CPU_LIBRARY))) {
            throw new EngineException(
                    source + ": " + directory + " has no " + CPU_LIBRARY
                            + " (the CMake build of native-ops writes it to its build directory)");
        }
        return directory;
    }

    /**
     * Whether {@code libtorch_cuda.so} is mapped into the process, read from a {@code maps} file.
     *
     * @param maps the file, normally {@code /proc/self/maps}
     * @return {@code true} or {@code false}, or {@code null} when the file cannot be read (no
     *     {@code /proc}: not Linux)
     */
    static Boolean libtorchCudaMapped(Path maps) {
        List<String> lines;
        try {
            lines = Files.readAllLines(maps);
        } catch (IOException e) {
            return null;
        }
        for (String line : lines) {
            int slash = line.lastIndexOf('/');
            if (slash >= 0 && line.startsWith("libtorch_cuda", slash + 1)) {
                return true;
            }
        }
        return false;
    }

    private static void loadCudaLibrary(Path directory) {
        if (directory != null) {
            Path file = directory.resolve(CUDA_LIBRARY);
            if (Files.isRegularFile(file)) {
                loadFile(file);
                cudaLoaded = true;
                return;
            }
            logger.warn(
                    "{} has no {}; looking for it on the class path", directory, CUDA_LIBRARY);
        }
        String resource = Loader.getPlatform() + '/' + CUDA_LIBRARY;
        URL url = DjlAttnLibrary.class.getResource(resource);
        if (url == null) {
            logger.warn(
                    "The loaded libtorch has CUDA but no {} was found; operators on GPU arrays"
                        + " will fail. Add io.djlattention:djl-attention-native with classifier"
                        + " {}-cu, or set {} / {} to a directory holding it.",
                    CUDA_LIBRARY,
                    Loader.getPlatform(),
                    LIBRARY_PATH_PROPERTY,
                    LIBRARY_PATH_ENV);
            return;
        }
        try {
            File file = Loader.cacheResource(url);
            loadFile(file.toPath());
            cudaLoaded = true;
        } catch (IOException e) {
            throw new EngineException(
                    "Failed to extract " + CUDA_LIBRARY + ": " + e.getMessage(), e);
        }
    }

    private static void loadLinkLibrary(Path file) {
        String loadedPath;
        try {
            loadedPath = Loader.loadLibrary(
                            DjlAttnLibrary.class, new URL[] {file.toUri().toURL()}, "djl_attn");
        } catch (IOException | UnsatisfiedLinkError e) {
            throw new EngineException("Failed to load " + file + ": " + e.getMessage(), e);
        }
        if (loadedPath == null) {
            throw new EngineException("Failed to load " + file);
        }
        logger.debug("Loaded {}", loadedPath);
    }

    private static void loadFile(Path file) {
        try {
            System.load(file.toAbsolutePath().toString());
        } catch (UnsatisfiedLinkError e) {
            throw new EngineException("Failed to load " + file + ": " + e.getMessage(), e);
        }
        logger.debug("Loaded {}", file);
    }

    private static String firstLine(String message) {
        int newline = message.indexOf('\n');
        return newline < 0 ? message : message.substring(0, newline);
    }
}
