/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.repository.LocalRepository;
import ai.djl.repository.MRL;
import ai.djl.repository.Metadata;
import ai.djl.repository.RemoteRepository;
import ai.djl.repository.Repository;
import ai.djl.repository.RepositoryFactory;
import ai.djl.repository.zoo.ModelLoader;
import ai.djl.repository.zoo.ModelZoo;
import ai.djl.util.JsonUtils;
import ai.djl.util.Utils;

import com.google.gson.JsonParseException;

import java.io.IOException;
import java.io.Reader;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Makes {@code Criteria.optModelUrls("djl://io.djlattention/...")} and {@code
 * Criteria.optModelPath(checkpoint)} load through this zoo, offline.
 *
 * <p>Why a repository factory: DJL 0.36.0 turns every model URL and path into a {@code
 * DefaultModelZoo} of its own whose loader reads the model from a {@link Repository}, chosen by
 * the URL's scheme; a zoo registered by a {@code ZooProvider} is never asked. Its built-in {@code
 * djl} scheme would fetch {@code djl://io.djlattention/...} from mlrepo.djl.ai, and its {@code file}
 * scheme would look for a TorchScript file in a Hugging Face directory. This factory, registered
 * in {@code META-INF/services/ai.djl.repository.RepositoryFactory} (DJL lets a registered factory
 * replace a built-in scheme), takes over exactly:
 *
 * <ul>
 *   <li>{@code djl://io.djlattention/<artifact>} (the built-in models);
 *   <li>{@code file:} paths that {@link CheckpointLoader#isCheckpoint} claims (Hugging Face
 *       directories and llama2.c files without another engine's model files), and empty
 *       directories (the zoo's loader names them and what they lack; criteria with their own
 *       translator and block load them as DJL does).
 * </ul>
 *
 * Every other {@code djl} and {@code file} URI gets the repository DJL's own factory would create
 * (the same classes, built the same way), except that a {@code file:} path that does not exist,
 * or a file of a Hugging Face checkpoint directory, is named when a model is looked up in it
 * ({@link PlainPathRepository}) instead of matching nothing.
 */
public final class DjlAttentionRepositoryFactory implements RepositoryFactory {

    /** DJL's pattern for a version in a {@code djl://} path: {@code artifact/1.0/name}. */
    private static final Pattern VERSIONED = Pattern.compile("(.+)/([\\d.]+)(/(.*))?");

    /** {@inheritDoc} */
    @Override
    public Repository newInstance(String name, URI uri) {
        if ("djl".equals(uri.getScheme())) {
            return djl(name, uri);
        }
        return file(name, uri);
    }

    /** {@inheritDoc} */
    @Override
    public Set<String> getSupportedScheme() {
        return Set.of("djl", "file");
    }

    /**
     * Returns the repository of a built-in model (its MRL for {@link BuiltinModelLoader}; it
     * touches no file until DJL locates the model).
     *
     * @param artifactId the model's artifact id
     * @return the repository
     */
    static Repository builtinRepository(String artifactId) {
        URI uri = URI.create("djl://" + DjlAttentionModelZoo.GROUP_ID + '/' + artifactId);
        return new CheckpointRepository(
                uri.toString(),
                uri,
                markerDirectory(artifactId),
                Map.of(DelegatingTranslatorFactory.ARG_BUILTIN, artifactId));
    }

    private static Repository djl(String name, URI uri) {
        String groupId = uri.getHost();
        if (!DjlAttentionModelZoo.GROUP_ID.equals(groupId)) {
            return djlRemote(name, uri);
        }
        String artifactId = artifactOf(uri);
        ModelZoo zoo = ModelZoo.getModelZoo(groupId);
        if (zoo == null || zoo.getModelLoader(artifactId) == null) {
            throw new IllegalArgumentException(
                    uri
                            + ": no such model in "
                            + groupId
                            + " (it has "
                            + DjlAttentionModelZoo.MINILM
                            + " and "
                            + DjlAttentionModelZoo.STORIES
                            + ")");
        }
        Path marker = markerDirectory(artifactId);
        try {
            // DJL's loader needs an existing, empty directory to call the model's location.
            Files.createDirectories(marker);
        } catch (IOException e) {
            throw new UncheckedIOException(marker + ": cannot create: " + e.getMessage(), e);
        }
        return new CheckpointRepository(
                name, uri, marker, Map.of(DelegatingTranslatorFactory.ARG_BUILTIN, artifactId));
    }

    private static Repository file(String name, URI uri) {
        Path path = Paths.get(filePath(uri));
        // An empty directory goes to the zoo's loader too, which names it and what it lacks (DJL
        // would end in a generic ModelNotFoundException); criteria with their own translator and
        // block still load it as DJL does.
        if (CheckpointLoader.isCheckpoint(path) || CheckpointLoader.isEmptyDirectory(path)) {
            return new CheckpointRepository(
                    name,
                    uri,
                    path,
                    Map.of(DelegatingTranslatorFactory.ARG_PATH, path.toAbsolutePath().toString()));
        }
        // What DJL 0.36.0's LocalRepositoryFactory does.
        if (Files.isDirectory(path)) {
            try (Stream<Path> files = Files.walk(path)) {
                if (files.anyMatch(f -> isLocalRepository(path, f))) {
                    return new LocalRepository(name, path.toUri(), path) {};
                }
            } catch (IOException e) {
                // DJL falls back to a simple repository too
            }
        }
        // DJL's SimpleRepository, but a missing path or a file of a checkpoint directory is
        // named when a model is looked up in it.
        return new PlainPathRepository(name, uri, path);
    }

    /** What DJL 0.36.0's DjlRepositoryFactory does for groups other than this zoo's. */
    private static Repository djlRemote(String name, URI uri) {
        String query = uri.getQuery();
        URI base =
                URI.create(
                        query != null
                                ? ModelZoo.DJL_REPO_URL + "?" + query
                                : ModelZoo.DJL_REPO_URL.toString());
        RemoteRepository repo = new RemoteRepository(name, base);
        String groupId = uri.getHost();
        if (groupId == null) {
            throw new IllegalArgumentException("Invalid djl URL: " + uri);
        }
        String artifactId = filePath(uri);
        if (artifactId.startsWith("/")) {
            artifactId = artifactId.substring(1);
        }
        if (artifactId.isEmpty()) {
            throw new IllegalArgumentException("Invalid djl URL: " + uri);
        }
        String version = null;
        String artifactName = null;
        Matcher m = VERSIONED.matcher(artifactId);
        if (m.matches()) {
            artifactId = m.group(1);
            version = m.group(2);
            artifactName = m.group(4);
        }
        ModelZoo zoo = ModelZoo.getModelZoo(groupId);
        if (zoo == null) {
            throw new IllegalArgumentException("ModelZoo not found in classpath: " + groupId);
        }
        ModelLoader loader = zoo.getModelLoader(artifactId);
        if (loader == null) {
            throw new IllegalArgumentException("Invalid djl URL: " + uri);
        }
        MRL mrl = repo.model(loader.getApplication(), groupId, artifactId, version, artifactName);
        repo.addResource(mrl);
        return repo;
    }

    private static String artifactOf(URI uri) {
        String artifactId = filePath(uri);
        if (artifactId.startsWith("/")) {
            artifactId = artifactId.substring(1);
        }
        Matcher m = VERSIONED.matcher(artifactId);
        return m.matches() ? m.group(1) : artifactId;
    }

    /** DJL's RepositoryFactoryImpl.parseFilePath. */
    private static String filePath(URI uri) {
        String path = uri.getPath();
        if (path == null) {
            path = uri.getSchemeSpecificPart();
        }
        if (path.startsWith("file:")) {
            path = path.substring(5);
        }
        if (path.startsWith("/") && System.getProperty("os.name").startsWith("Win")) {
            path = path.substring(1);
        }
        return path;
    }

    /** DJL's LocalRepositoryFactory.isLocalRepository. */
    private static boolean isLocalRepository(Path root, Path file) {
        if (!Files.isRegularFile(file) || root.equals(file.getParent())) {
            return false;
        }
        if (!"metadata.json".equals(file.toFile().getName())) {
            return false;
        }
        try (Reader reader = Files.newBufferedReader(file)) {
            Metadata metadata = JsonUtils.GSON.fromJson(reader, Metadata.class);
            return metadata.getMetadataVersion() != null && metadata.getArtifacts() != null;
        } catch (IOException | JsonParseException e) {
            return false;
        }
    }

    private static Path markerDirectory(String artifactId) {
        return Utils.getCacheDir().resolve("djl-attention").resolve(artifactId);
    }
}
