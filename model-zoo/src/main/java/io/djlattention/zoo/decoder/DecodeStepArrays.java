/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.decoder;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.StepOps;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;

/**
 * The arrays of one decode-step bucket ({@code rows} sequences, block tables {@code width} wide)
 * at fixed addresses: what a captured step's graph reads and writes every replay. Inputs are
 * written on the host into three typed staging arrays (one per dtype, each filled through a
 * buffer over its memory, no JNI) and copied to the device by three {@code copy_from_host} calls;
 * the device arrays the operators read are views into the three device twins.
 *
 * <pre>
 * int64   [5 B]          token ids | positions | slots | seeds | offsets
 * int32   [B W + 3 B + 1] block tables [B, W] | context lengths | cu_seqlens_q [B + 1] | top-k
 * float32 [2 B]          temperature | top-p
 * </pre>
 */
final class DecodeStepArrays implements AutoCloseable {

    final int rows;
    final int width;
    private final NDManager manager;

    private final NDArray host64;
    private final NDArray host32;
    private final NDArray hostF32;
    private final NDArray device64;
    private final NDArray device32;
    private final NDArray deviceF32;
    final LongBuffer longs;
    final IntBuffer ints;
    final FloatBuffer floats;

    final NDArray tokenIds;
    final NDArray positions;
    final NDArray slots;
    final NDArray seeds;
    final NDArray offsets;
    final NDArray blockTables;
    final NDArray contextLens;
    final NDArray cuSeqlensQ;
    final NDArray topK;
    final NDArray temperature;
    final NDArray topP;

    final NDArray hidden;
    final NDArray logits;
    final NDArray nextIds;

    DecodeStepArrays(NDManager parent, int rows, int width, DecoderConfig config) {
        this.rows = rows;
        this.width = width;
        manager = parent.newSubManager();
        NDManager host = manager.newSubManager(ai.djl.Device.cpu());
        int b = rows;
        host64 = host.zeros(new Shape(5L * b), DataType.INT64);
        host32 = host.zeros(new Shape((long) b * width + 3L * b + 1), DataType.INT32);
        hostF32 = host.zeros(new Shape(2L * b), DataType.FLOAT32);
        longs = direct(host64).asLongBuffer();
        ints = direct(host32).asIntBuffer();
        floats = direct(hostF32).asFloatBuffer();
        device64 = manager.zeros(host64.getShape(), DataType.INT64);
        device32 = manager.zeros(host32.getShape(), DataType.INT32);
        deviceF32 = manager.zeros(hostF32.getShape(), DataType.FLOAT32);
        tokenIds = slice(device64, 0, b);
        positions = slice(device64, b, b);
        slots = slice(device64, 2 * b, b);
        seeds = slice(device64, 3 * b, b);
        offsets = slice(device64, 4 * b, b);
        int t = b * width;
        blockTables = slice(device32, 0, t).reshape(b, width);
        contextLens = slice(device32, t, b);
        cuSeqlensQ = slice(device32, t + b, b + 1);
        topK = slice(device32, t + 2 * b + 1, b);
        temperature = slice(deviceF32, 0, b);
        topP = slice(deviceF32, b, b);
        hidden = manager.zeros(new Shape(b, config.getHiddenSize()), config.getDataType());
        logits = manager.zeros(new Shape(b, config.getVocabSize()), DataType.FLOAT32);
        nextIds = manager.zeros(new Shape(b), DataType.INT64);
    }

    /** The staging arrays' contents to the device, in stream order. */
    void upload() {
        StepOps.copyFromHost(device64, host64);
        StepOps.copyFromHost(device32, host32);
        StepOps.copyFromHost(deviceF32, hostF32);
    }

    /** Bytes of device memory these arrays hold. */
    long deviceBytes() {
        long bytes = 0;
        for (NDArray a : new NDArray[] {device64, device32, deviceF32, hidden, logits, nextIds}) {
            bytes += a.size() * a.getDataType().getNumOfBytes();
        }
        return bytes;
    }

    private static ByteBuffer direct(NDArray hostArray) {
        ByteBuffer buffer = hostArray.toByteBuffer(true);
        if (!buffer.isDirect()) {
            throw new IllegalStateException("a CPU array's buffer is not its memory");
        }
        return buffer.order(ByteOrder.nativeOrder());
    }

    /** A view of {@code length} elements of a 1-D array from {@code start}. */
    private static NDArray slice(NDArray array, long start, long length) {
        return array.get(new NDIndex("{}:{}", start, start + length));
    }

    @Override
    public void close() {
        manager.close();
    }
}
