/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.hf;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Collections;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One open {@code .safetensors} file (Hugging Face's format: an 8-byte little-endian header
 * length, a JSON header mapping each name to its {@code dtype}, {@code shape} and {@code
 * data_offsets} within the data section, then the raw little-endian data), read one tensor at a
 * time straight into the array that keeps it.
 *
 * <p>{@link #open} reads and checks the header only. {@link #readInto} copies a tensor once: from
 * the file into the destination's own memory (a CPU destination: the kernel's read into it; a GPU
 * destination: into a host staging array of {@value #DEVICE_STAGING_BYTES} bytes, then one
 * host-to-device copy per staging load), converting F32, F16 and BF16 to float32 or float16 on
 * the way (through a {@value #CONVERSION_STAGING_BYTES}-byte buffer), as libtorch's {@code
 * Tensor.to} would. Nothing of a whole tensor is ever held twice, in the Java heap or elsewhere:
 * loading a checkpoint costs its weights once, in the target type.
 *
 * <p>The staging buffers are one set per {@link CheckpointWeights} (or per file opened alone),
 * allocated once: a stage allocated and freed per tensor cost ~30 MB more resident memory (glibc
 * raises its mmap threshold after each free of a large block, and later blocks fragment its heap).
 * Why positional reads and not a mapped file: on Java 17 a {@code MappedByteBuffer} is unmapped
 * only when the garbage collector frees it, and while mapped its touched pages count in the
 * process's resident size, so a mapped load shows the weights twice (file pages and arrays) until a
 * collection happens to run. Both measured in docs/design/checkpoint-loading.md.
 *
 * <p>Supported dtypes: F32, F16, BF16 (to float32 or float16), I32 and I64 (kept). A tensor of
 * another dtype may be present; reading it fails naming the file, the tensor and the dtype. Not
 * thread-safe: one reader at a time (the staging buffers are shared).
 */
public final class SafetensorsFile implements AutoCloseable {

    /** Host bytes staged per host-to-device copy of a GPU destination. */
    static final int DEVICE_STAGING_BYTES = 16 << 20;

    /**
     * File bytes read per piece of a converted tensor: reads of a few MB cost no more per byte than
     * one large read, and a larger stage is only more resident memory.
     */
    static final int CONVERSION_STAGING_BYTES = 4 << 20;

    /** The largest byte count one direct buffer over a destination covers. */
    private static final long MAX_SPAN = 1L << 30;

    private final Path file;
    private final FileChannel channel;
    private final Map<String, Entry> entries;
    private final Stage stage;
    private final boolean ownsStage;

    /**
     * The host buffers of one checkpoint's reads, shared by its files, each allocated on first use
     * and kept until {@link #close}: the conversion buffer, and per destination type the staging
     * array of GPU destinations (libtorch memory, freed on close).
     */
    static final class Stage implements AutoCloseable {
        private ByteBuffer conversion;
        private NDManager host;
        private final Map<DataType, NDArray> device = new EnumMap<>(DataType.class);

        ByteBuffer conversion() {
            if (conversion == null) {
                conversion = ByteBuffer.allocateDirect(CONVERSION_STAGING_BYTES);
            }
            return conversion;
        }

        NDArray device(DataType type) {
            if (host == null) {
                host = NDManager.newBaseManager(Device.cpu(), "PyTorch");
            }
            return device.computeIfAbsent(
                    type,
                    t -> host.create(new Shape(DEVICE_STAGING_BYTES / t.getNumOfBytes()), t));
        }

        @Override
        public void close() {
            device.clear();
            if (host != null) {
                host.close();
                host = null;
            }
        }
    }

    /** One tensor of the header. */
    public static final class Entry {
        private final String name;
        private final String dtype;
        private final Shape shape;
        private final long position;
        private final long bytes;

        Entry(String name, String dtype, Shape shape, long position, long bytes) {
            this.name = name;
            this.dtype = dtype;
            this.shape = shape;
            this.position = position;
            this.bytes = bytes;
        }

        /**
         * Returns the tensor's name.
         *
         * @return the name
         */
        public String getName() {
            return name;
        }

        /**
         * Returns the dtype as the file spells it ({@code F32}, {@code BF16}, ...).
         *
         * @return the dtype
         */
        public String getDtype() {
            return dtype;
        }

        /**
         * Returns the shape.
         *
         * @return the shape
         */
        public Shape getShape() {
            return shape;
        }

        /**
         * Returns the data's size in the file.
         *
         * @return the byte count
         */
        public long getBytes() {
            return bytes;
        }
    }

    private SafetensorsFile(
            Path file, FileChannel channel, Map<String, Entry> entries, Stage stage, boolean owns) {
        this.file = file;
        this.channel = channel;
        this.entries = entries;
        this.stage = stage;
        this.ownsStage = owns;
    }

    /**
     * Opens a file and reads its header.
     *
     * @param file the file
     * @return the open file; close it to release the file handle
     * @throws IOException if the file cannot be read, or its header is malformed, names a tensor
     *     whose data lies outside the file, or whose byte count does not match its shape and dtype
     */
    public static SafetensorsFile open(Path file) throws IOException {
        return open(file, new Stage(), true);
    }

    /** Opens a file that reads through a stage shared with others (closed by its owner). */
    static SafetensorsFile open(Path file, Stage stage) throws IOException {
        return open(file, stage, false);
    }

    private static SafetensorsFile open(Path file, Stage stage, boolean owns) throws IOException {
        FileChannel ch = FileChannel.open(file, StandardOpenOption.READ);
        try {
            return new SafetensorsFile(file, ch, readHeader(file, ch), stage, owns);
        } catch (IOException | RuntimeException e) {
            ch.close();
            throw e;
        }
    }

    private static Map<String, Entry> readHeader(Path file, FileChannel ch) throws IOException {
        long size = ch.size();
        ByteBuffer lengthBytes = ByteBuffer.allocate(8);
        readFully(ch, lengthBytes, 0, file);
        long headerLength = lengthBytes.flip().order(ByteOrder.LITTLE_ENDIAN).getLong();
        if (headerLength <= 0 || headerLength > Math.min(size - 8, 100_000_000)) {
            throw new IOException(file + ": bad safetensors header length " + headerLength);
        }
        ByteBuffer headerBytes = ByteBuffer.allocate((int) headerLength);
        readFully(ch, headerBytes, 8, file);
        JsonObject header;
        try {
            header =
                    JsonParser.parseString(
                                    StandardCharsets.UTF_8.decode(headerBytes.flip()).toString())
                            .getAsJsonObject();
        } catch (RuntimeException e) {
            throw new IOException(file + ": malformed safetensors header: " + e.getMessage(), e);
        }
        long dataStart = 8 + headerLength;
        Map<String, Entry> entries = new LinkedHashMap<>();
        for (Map.Entry<String, JsonElement> e : header.entrySet()) {
            if ("__metadata__".equals(e.getKey())) {
                continue;
            }
            String name = e.getKey();
            try {
                JsonObject info = e.getValue().getAsJsonObject();
                String dtype = info.get("dtype").getAsString();
                JsonArray dims = info.getAsJsonArray("shape");
                long[] shape = new long[dims.size()];
                for (int i = 0; i < shape.length; ++i) {
                    shape[i] = dims.get(i).getAsLong();
                    if (shape[i] < 0) {
                        throw new IOException(
                                file + ": tensor " + name + " has a negative dimension " + dims);
                    }
                }
                JsonArray offsets = info.getAsJsonArray("data_offsets");
                long begin = offsets.get(0).getAsLong();
                long end = offsets.get(1).getAsLong();
                Shape s = new Shape(shape);
                int elementSize = elementSize(dtype);
                if (begin < 0
                        || end < begin
                        || end > size - dataStart
                        || elementSize > 0 && end - begin != s.size() * elementSize) {
                    throw new IOException(
                            file + ": tensor " + name + " has bad data_offsets " + offsets);
                }
                entries.put(name, new Entry(name, dtype, s, dataStart + begin, end - begin));
            } catch (RuntimeException bad) {
                throw new IOException(
                        file + ": tensor " + name + ": malformed header entry " + e.getValue(),
                        bad);
            }
        }
        return entries;
    }

    /**
     * Returns the file.
     *
     * @return the path
     */
    public Path getFile() {
        return file;
    }

    /**
     * Returns the header's tensors by name, in file order.
     *
     * @return the entries (unmodifiable)
     */
    public Map<String, Entry> getEntries() {
        return Collections.unmodifiableMap(entries);
    }

    /**
     * Reads every tensor of a file: F32, F16, I32 and I64 keep their type, BF16 becomes float32
     * (DJL 0.36.0's PyTorch engine cannot hold bfloat16 arrays).
     *
     * @param file the file
     * @param manager the manager the arrays attach to
     * @return the tensors by name, in file order
     * @throws IOException if the file cannot be read, is malformed or holds an unsupported dtype
     */
    public static Map<String, NDArray> readAll(Path file, NDManager manager) throws IOException {
        try (SafetensorsFile f = open(file)) {
            Map<String, NDArray> tensors = new LinkedHashMap<>();
            for (Entry e : f.entries.values()) {
                tensors.put(e.name, f.read(e.name, manager, keptType(e.dtype)));
            }
            return tensors;
        }
    }

    /** The type a stored dtype is read as by default: its own, float32 for BF16. */
    static DataType keptType(String dtype) {
        switch (dtype) {
            case "F16":
                return DataType.FLOAT16;
            case "I32":
                return DataType.INT32;
            case "I64":
                return DataType.INT64;
            default: // F32, BF16; another dtype fails in read, naming it
                return DataType.FLOAT32;
        }
    }

    /**
     * Reads one tensor into a new array on the manager's device.
     *
     * @param name the tensor
     * @param manager the manager that will own the array
     * @param dataType float32 or float16 for a floating-point tensor; the stored type for I32 and
     *     I64
     * @return the array
     * @throws IOException if the file lacks the tensor, its dtype cannot be converted to {@code
     *     dataType}, or the file cannot be read
     */
    public NDArray read(String name, NDManager manager, DataType dataType) throws IOException {
        Entry entry = require(name);
        checkConversion(entry, dataType);
        NDArray array = manager.create(entry.shape, dataType);
        try {
            readInto(name, array);
        } catch (IOException | RuntimeException e) {
            array.close();
            throw e;
        }
        return array;
    }

    /**
     * Reads one tensor into an array allocated by the caller: its values converted to the
     * destination's type, with one copy from the file into the destination's memory.
     *
     * @param name the tensor
     * @param destination a contiguous array of the tensor's element count (any shape; a row range
     *     of a larger array is fine), float32 or float16 for F32, F16 and BF16 tensors, the stored
     *     type for I32 and I64; on the CPU or a GPU
     * @throws IOException if the file lacks the tensor, its dtype cannot be converted to the
     *     destination's, or the file cannot be read
     * @throws IllegalArgumentException if the destination's element count differs from the
     *     tensor's
     */
    public void readInto(String name, NDArray destination) throws IOException {
        Entry entry = require(name);
        DataType type = destination.getDataType();
        checkConversion(entry, type);
        if (destination.size() != entry.shape.size()) {
            throw new IllegalArgumentException(
                    "destination: expected "
                            + entry.shape.size()
                            + " elements for tensor "
                            + name
                            + " "
                            + entry.shape
                            + " of "
                            + file
                            + ", got "
                            + destination.getShape());
        }
        if (entry.shape.size() == 0) {
            return;
        }
        if (destination.getDevice().isGpu()) {
            readThroughHost(entry, destination);
        } else {
            readToHost(entry, destination, 0, entry.shape.size());
        }
    }

    /** A GPU destination: staged on the host in chunks of rows, one host-to-device copy each. */
    private void readThroughHost(Entry entry, NDArray destination) throws IOException {
        long count = entry.shape.size();
        NDArray stage = this.stage.device(destination.getDataType());
        long chunk = stage.size();
        try (NDArray flat = destination.reshape(count)) {
            for (long start = 0; start < count; start += chunk) {
                long n = Math.min(chunk, count - start);
                NDArray part = n == chunk ? stage : stage.get(new NDIndex("0:{}", n));
                try {
                    readToHost(entry, part, start, n);
                    flat.set(new NDIndex("{}:{}", start, start + n), part);
                } finally {
                    if (part != stage) {
                        part.close();
                    }
                }
            }
        }
    }

    /**
     * Copies elements {@code [start, start + n)} of a tensor into a CPU array of n elements,
     * through direct buffers over the array's own memory (at most {@link #MAX_SPAN} bytes each).
     */
    private void readToHost(Entry entry, NDArray host, long start, long n) throws IOException {
        int fileSize = elementSize(entry.dtype);
        int size = host.getDataType().getNumOfBytes();
        long span = MAX_SPAN / size;
        try (NDArray flat = host.reshape(n)) {
            for (long at = 0; at < n; at += span) {
                long m = Math.min(span, n - at);
                NDArray piece = m == n ? flat : flat.get(new NDIndex("{}:{}", at, at + m));
                try {
                    // A contiguous CPU array's own memory (DJL's PyTorch engine wraps its data
                    // pointer); nothing is copied out.
                    ByteBuffer target = piece.toByteBuffer(true);
                    if (!target.isDirect() || target.capacity() != m * size) {
                        throw new IllegalStateException(
                                "expected a direct buffer of "
                                        + m * size
                                        + " bytes over the destination, got "
                                        + target.capacity());
                    }
                    long position = entry.position + (start + at) * fileSize;
                    if (entry.dtype.equals(fileDtype(host.getDataType()))) {
                        readFully(channel, target, position, file);
                    } else {
                        convertFromFile(entry, position, target, size == 2, m, fileSize);
                    }
                } finally {
                    if (piece != flat) {
                        piece.close();
                    }
                }
            }
        }
    }

    /** Reads {@code count} elements at a file position in staging-sized pieces, converting each. */
    private void convertFromFile(
            Entry entry, long position, ByteBuffer target, boolean toHalf, long count, int fileSize)
            throws IOException {
        int perChunk = CONVERSION_STAGING_BYTES / fileSize;
        int outSize = toHalf ? 2 : 4;
        ByteBuffer buffer = stage.conversion();
        for (long done = 0; done < count; ) {
            int n = (int) Math.min(perChunk, count - done);
            buffer.clear().limit(n * fileSize);
            readFully(channel, buffer, position + done * fileSize, file);
            buffer.flip();
            target.position(Math.toIntExact(done * outSize));
            ElementConversion.convert(buffer, entry.dtype, target, toHalf, n);
            done += n;
        }
    }

    private Entry require(String name) throws IOException {
        Entry entry = entries.get(name);
        if (entry == null) {
            throw new IOException(file + ": missing tensor " + name);
        }
        return entry;
    }

    private void checkConversion(Entry entry, DataType type) throws IOException {
        if (elementSize(entry.dtype) == 0) {
            throw new IOException(
                    file + ": tensor " + entry.name + " has unsupported dtype " + entry.dtype);
        }
        boolean floating = entry.dtype.startsWith("F") || "BF16".equals(entry.dtype);
        boolean ok =
                floating
                        ? type == DataType.FLOAT32 || type == DataType.FLOAT16
                        : entry.dtype.equals(fileDtype(type));
        if (!ok) {
            throw new IOException(
                    file
                            + ": tensor "
                            + entry.name
                            + " ("
                            + entry.dtype
                            + ") cannot be read as "
                            + type
                            + (floating ? " (float32 or float16)" : " (integers keep their type)"));
        }
    }

    /** The safetensors dtype that holds a DJL type unchanged, or null. */
    private static String fileDtype(DataType type) {
        switch (type) {
            case FLOAT32:
                return "F32";
            case FLOAT16:
                return "F16";
            case INT32:
                return "I32";
            case INT64:
                return "I64";
            default:
                return null;
        }
    }

    /** Bytes per element of a supported dtype; 0 for another. */
    private static int elementSize(String dtype) {
        switch (dtype) {
            case "F32":
            case "I32":
                return 4;
            case "F16":
            case "BF16":
                return 2;
            case "I64":
                return 8;
            default:
                return 0;
        }
    }

    private static void readFully(FileChannel ch, ByteBuffer b, long position, Path file)
            throws IOException {
        long at = position;
        while (b.hasRemaining()) {
            int n = ch.read(b, at);
            if (n < 0) {
                throw new IOException(file + ": truncated safetensors file");
            }
            at += n;
        }
    }

    /**
     * Closes the file (and the staging buffers of a file opened alone). Closing twice is harmless.
     */
    @Override
    public void close() throws IOException {
        if (ownsStage) {
            stage.close();
        }
        channel.close();
    }
}
