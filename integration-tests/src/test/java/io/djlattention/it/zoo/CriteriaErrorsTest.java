/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.zoo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.inference.Predictor;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.nn.LambdaBlock;
import ai.djl.repository.zoo.Criteria;
import ai.djl.repository.zoo.ModelNotFoundException;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.translate.NoopTranslator;

import io.djlattention.it.HfFixtures;
import io.djlattention.zoo.CheckpointLoader;
import io.djlattention.zoo.DecoderModels;
import io.djlattention.zoo.DjlAttentionModelZoo;
import io.djlattention.zoo.encoder.EncoderModels;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What a newcomer gets from {@code Criteria} for a wrong path or a misspelled argument (issue 23):
 * an error naming the path and what is missing, or the argument and the known ones, never DJL's
 * generic "No model with the specified URI" without the path. Each case is checked through
 * DJL's front door ({@code optModelPath}, {@code optModelUrls}, group + artifact); none needs
 * model weights beyond the built-in ones, and none loads them (the checks come first).
 */
class CriteriaErrorsTest {

    @TempDir Path tmp;

    private static Criteria.Builder<String, float[]> embeddings() {
        return Criteria.builder().setTypes(String.class, float[].class).optEngine("PyTorch");
    }

    private static Criteria.Builder<int[], int[]> tokens() {
        return Criteria.builder().setTypes(int[].class, int[].class).optEngine("PyTorch");
    }

    private static void assertMessage(Throwable e, String... parts) {
        for (String part : parts) {
            assertTrue(e.getMessage().contains(part), "'" + part + "' in: " + e.getMessage());
        }
    }

    @Test
    void missingPathIsNamed() {
        Path absent = tmp.resolve("no-such-model-" + new Random().nextInt(1_000_000));
        FileNotFoundException byPath =
                assertThrows(
                        FileNotFoundException.class,
                        () -> embeddings().optModelPath(absent).build().loadModel());
        assertMessage(byPath, absent.toString(), "no such file or directory", "config.json");
        // The same as a file: URL, for a decoder's types.
        FileNotFoundException byUrl =
                assertThrows(
                        FileNotFoundException.class,
                        () -> tokens().optModelUrls(absent.toUri().toString()).build().loadModel());
        assertMessage(byUrl, absent.toString(), "no such file or directory", "llama2.c");
    }

    @Test
    void emptyDirectoryIsNamed() throws IOException {
        Path empty = Files.createDirectory(tmp.resolve("empty"));
        for (Criteria.Builder<?, ?> builder : List.of(embeddings(), tokens())) {
            UncheckedIOException e =
                    assertThrows(
                            UncheckedIOException.class,
                            () -> builder.optModelPath(empty).build().loadModel());
            assertMessage(
                    e, empty.toString(), "empty directory", "config.json", "model.safetensors");
        }
    }

    @Test
    void emptyDirectoryStillLoadsWithTheCallersOwnTranslatorAndBlock() throws Exception {
        // DJL's own use of an empty folder: a parameterless block and a translator of the
        // caller's. The zoo must not take it over.
        Path empty = Files.createDirectory(tmp.resolve("parameterless"));
        Criteria<NDList, NDList> criteria =
                Criteria.builder()
                        .setTypes(NDList.class, NDList.class)
                        .optModelPath(empty)
                        .optEngine("PyTorch")
                        .optBlock(new LambdaBlock(x -> new NDList(x.singletonOrThrow().mul(2))))
                        .optTranslator(new NoopTranslator())
                        .optOption("hasParameter", "false")
                        .build();
        float[] x = {new Random().nextFloat(), -3.5f, 0.25f};
        try (ZooModel<NDList, NDList> model = criteria.loadModel();
                Predictor<NDList, NDList> predictor = model.newPredictor();
                NDManager manager = NDManager.newBaseManager("PyTorch")) {
            float[] y = predictor.predict(new NDList(manager.create(x))).head().toFloatArray();
            assertArrayEquals(new float[] {2 * x[0], -7f, 0.5f}, y);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"config.json", "tokenizer.json", "model.safetensors"})
    void fileOfACheckpointNamesItsDirectory(String file) throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("checkpoint"));
        Files.writeString(
                dir.resolve("config.json"),
                "{\"architectures\": [\"BertModel\"]}",
                StandardCharsets.UTF_8);
        Files.writeString(dir.resolve("tokenizer.json"), "{}", StandardCharsets.UTF_8);
        Files.write(dir.resolve("model.safetensors"), new byte[8]);
        FileNotFoundException e =
                assertThrows(
                        FileNotFoundException.class,
                        () -> embeddings().optModelPath(dir.resolve(file)).build().loadModel());
        assertMessage(
                e,
                dir.resolve(file).toString(),
                "a file of the Hugging Face checkpoint directory " + dir,
                "give the directory");
    }

    @Test
    void misspelledDecoderArgumentIsRefusedOnEveryRoute() {
        List<Criteria.Builder<int[], int[]>> routes = new ArrayList<>();
        routes.add(tokens().optModelUrls("djl://io.djlattention/stories260K"));
        routes.add(
                tokens().optGroupId(DjlAttentionModelZoo.GROUP_ID)
                        .optArtifactId(DjlAttentionModelZoo.STORIES));
        for (Criteria.Builder<int[], int[]> route : routes) {
            IllegalArgumentException e =
                    assertThrows(
                            IllegalArgumentException.class,
                            () -> route.optArgument("maxNewTokenz", 8).build().loadModel());
            assertMessage(
                    e,
                    "argument maxNewTokenz: unknown to decoder models",
                    "did you mean maxNewTokens?",
                    "known arguments: " + String.join(", ", DecoderModels.ARGUMENTS.names()));
        }
    }

    @Test
    void urlQueryArgumentsAreCheckedAndDjlsOwnAreLeftAlone() throws Exception {
        // DJL puts a URL's query into the artifact's arguments: the zoo's are checked like
        // optArgument's, DJL's repository arguments (model_name) are not refused.
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () ->
                                tokens().optModelUrls(
                                                "djl://io.djlattention/stories260K?maxNewTokenz=2")
                                        .build()
                                        .loadModel());
        assertMessage(e, "argument maxNewTokenz", "did you mean maxNewTokens?");
        int newTokens = 2 + new Random().nextInt(4);
        Criteria<int[], int[]> criteria =
                tokens().optModelUrls(
                                "djl://io.djlattention/stories260K?model_name=tiny&maxNewTokens="
                                        + newTokens)
                        .build();
        try (ZooModel<int[], int[]> model = criteria.loadModel();
                Predictor<int[], int[]> predictor = model.newPredictor()) {
            // stories260K's EOS is id 1; a greedy continuation of this prompt runs past it.
            assertEquals(newTokens, predictor.predict(new int[] {1, 403, 407}).length);
        }
    }

    @Test
    void unknownEncoderArgumentIsRefusedWithTheKnownOnes() {
        IllegalArgumentException e =
                assertThrows(
                        IllegalArgumentException.class,
                        () ->
                                embeddings()
                                        .optModelUrls("djl://io.djlattention/all-MiniLM-L6-v2")
                                        .optArgument("poolingMode", "cls")
                                        .optArgument("maxLength", 128)
                                        .build()
                                        .loadModel());
        assertMessage(
                e,
                "argument poolingMode: unknown to encoder models",
                "known arguments: " + String.join(", ", EncoderModels.ARGUMENTS.names()));
        // Far from every known name: no suggestion.
        assertTrue(!e.getMessage().contains("did you mean"), e.getMessage());
    }

    @Test
    void missingWeightsFileIsNamed() throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("no-weights"));
        Files.copy(
                HfFixtures.dir("decoders").resolve("gpt2").resolve("config.json"),
                dir.resolve("config.json"));
        UncheckedIOException e =
                assertThrows(
                        UncheckedIOException.class,
                        () -> tokens().optModelPath(dir).build().loadModel());
        assertMessage(e, dir.resolve("model.safetensors").toString());
    }

    @Test
    void missingShardIsNamedWithItsIndex() throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("sharded"));
        Files.copy(
                HfFixtures.dir("decoders").resolve("gpt2").resolve("config.json"),
                dir.resolve("config.json"));
        Files.writeString(
                dir.resolve("model.safetensors.index.json"),
                "{\"weight_map\": {\"wte.weight\": \"model-00001-of-00002.safetensors\"}}",
                StandardCharsets.UTF_8);
        UncheckedIOException e =
                assertThrows(
                        UncheckedIOException.class,
                        () -> tokens().optModelPath(dir).build().loadModel());
        assertMessage(
                e,
                dir.resolve("model-00001-of-00002.safetensors").toString(),
                "model.safetensors.index.json",
                "missing");
    }

    @Test
    void unloadableTokenizerIsNamed() throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("bad-tokenizer"));
        Path gpt2 = HfFixtures.dir("decoders").resolve("gpt2");
        for (String file : new String[] {"config.json", "model.safetensors"}) {
            Files.copy(gpt2.resolve(file), dir.resolve(file));
        }
        Files.writeString(dir.resolve("tokenizer.json"), "{\"model\": 7}", StandardCharsets.UTF_8);
        UncheckedIOException e =
                assertThrows(
                        UncheckedIOException.class,
                        () ->
                                Criteria.builder()
                                        .setTypes(String.class, String.class)
                                        .optModelPath(dir)
                                        .build()
                                        .loadModel());
        assertMessage(e, dir.resolve("tokenizer.json").toString(), "cannot load the tokenizer");
    }

    @Test
    void tokenizerArgumentNamingNoFileIsNamed() {
        Path absent = tmp.resolve("absent").resolve("tokenizer.json");
        UncheckedIOException e =
                assertThrows(
                        UncheckedIOException.class,
                        () ->
                                tokens().optModelUrls("djl://io.djlattention/stories260K")
                                        .optArgument("tokenizer", absent.toString())
                                        .build()
                                        .loadModel());
        assertMessage(e, absent.toString(), "named by the argument tokenizer");
    }

    @Test
    void typesWithoutATaskKeepTheLoadersMessageInTheCauses() {
        ModelNotFoundException e =
                assertThrows(
                        ModelNotFoundException.class,
                        () ->
                                embeddings()
                                        .optModelUrls("djl://io.djlattention/stories260K")
                                        .build()
                                        .loadModel());
        StringBuilder chain = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            chain.append(t.getMessage()).append('\n');
        }
        assertTrue(
                chain.toString().contains("decoder models take String → String"),
                chain.toString());
        assertTrue(chain.toString().contains("got String → float[]"), chain.toString());
    }

    @Test
    void fileThatIsNoLlama2cCheckpointIsNamedByTheLoader() throws IOException {
        Path bin = tmp.resolve("weights.bin");
        Files.write(bin, new byte[] {1, 2, 3});
        IOException e =
                assertThrows(
                        IOException.class,
                        () -> CheckpointLoader.load(bin, tokens().build()));
        assertMessage(e, bin.toString(), "llama2.c header");
    }

    @Test
    void docsListExactlyTheArgumentsTheLoadersRead() throws IOException {
        String doc = Files.readString(modelZooDoc(), StandardCharsets.UTF_8);
        String section = doc.substring(doc.indexOf("## Criteria arguments"));
        section = section.substring(0, section.indexOf("\n## ", 1));
        int decoders = section.indexOf("Decoders (`DecoderModels`)");
        assertTrue(decoders > 0, "docs/model-zoo.md: no decoder table");
        assertEquals(
                new TreeSet<>(EncoderModels.ARGUMENTS.names()),
                tableArguments(section.substring(0, decoders)),
                "encoder arguments in docs/model-zoo.md");
        assertEquals(
                new TreeSet<>(DecoderModels.ARGUMENTS.names()),
                tableArguments(section.substring(decoders)),
                "decoder arguments in docs/model-zoo.md");
    }

    /** The backticked names in the first column of a markdown table. */
    private static TreeSet<String> tableArguments(String markdown) {
        TreeSet<String> names = new TreeSet<>();
        Pattern name = Pattern.compile("`([A-Za-z]+)`");
        for (String line : markdown.split("\n")) {
            if (!line.startsWith("| `")) {
                continue;
            }
            Matcher m = name.matcher(line.substring(1, line.indexOf('|', 1)));
            while (m.find()) {
                names.add(m.group(1));
            }
        }
        return names;
    }

    /** docs/model-zoo.md, found from the working directory up (the module or the repository). */
    private static Path modelZooDoc() {
        for (Path dir = Paths.get("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path doc = dir.resolve("docs").resolve("model-zoo.md");
            if (Files.isRegularFile(doc)) {
                return doc;
            }
        }
        throw new AssertionError(
                "docs/model-zoo.md not found above " + Paths.get("").toAbsolutePath());
    }
}
