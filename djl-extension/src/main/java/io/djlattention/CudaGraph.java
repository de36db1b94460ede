/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.pytorch.engine.PtNDArray;


/**
 * A sequence of djl-attention operator calls captured once into a CUDA graph and replayed as one
 * launch (docs/design/captured-decode-step.md). The calls must write only into arrays that
 * outlive the graph (a replay reads and writes the same addresses every time), allocate no
 * output (DJL operators and djl-attention operators that return arrays cannot be captured) and
 * read nothing back to the host. Their temporaries live in the graph's arena, sized by an eager
 * run of the same calls first, which also warms up every lazy choice they make (GEMM algorithms,
 * kernel attributes).
 *
 * <p>A graph belongs to the thread that captured it only while it captures; replays may come from
 * any thread, one at a time, and run on the current stream in order with other work.
 */
public final class CudaGraph implements AutoCloseable {

    private final NDArray arena;
    private final long id;
    private final long nodes;
    private boolean closed;

    private CudaGraph(NDArray arena, long id, long nodes) {
        this.arena = arena;
        this.id = id;
        this.nodes = nodes;
    }

    /**
     * Runs {@code calls} once eagerly, then captures them.
     *
     * @param manager the manager of the graph's arena (on the GPU the calls run on)
     * @param calls the operator calls; run twice, on the calling thread
     * @return the graph
     * @throws IllegalArgumentException if the manager is not on a GPU
     */
    public static CudaGraph capture(NDManager manager, Runnable calls) {
        Device device = manager.getDevice();
        if (!device.isGpu()) {
            throw new IllegalArgumentException(
                    "manager: expected a GPU manager (a CUDA graph captures GPU work), got "
                            + device);
        }
        long bytes;
        try (NDManager temp = manager.newSubManager()) {
            PtNDArray anchor = (PtNDArray) temp.zeros(new Shape(1), DataType.UINT8);
            OperatorCall.of(Operator.CUDA_GRAPH_MEASURE_BEGIN)
                    .tensor(anchor)
                    .invoke(anchor.getManager());
            PtNDArray measured;
            try {
                calls.run();
            } finally {
                measured =
                        OperatorCall.of(Operator.CUDA_GRAPH_MEASURE_END)
                                .tensor(anchor)
                                .invoke(anchor.getManager())[0];
            }
            bytes = measured.toLongArray()[0];
        }
        // At least one aligned slot, so that the arena has an address of its own.
        PtNDArray arena = (PtNDArray) manager.zeros(new Shape(Math.max(bytes, 256)), DataType.UINT8);
        try {
            OperatorCall.of(Operator.CUDA_GRAPH_CAPTURE_BEGIN)
                    .tensor(arena)
                    .invoke(arena.getManager());
            long[] graph;
            try {
                calls.run();
            } finally {
                // Ends the capture even when a call failed (the end then reports it).
                graph =
                        OperatorCall.of(Operator.CUDA_GRAPH_CAPTURE_END)
                                .tensor(arena)
                                .invoke(arena.getManager())[0]
                                .toLongArray();
            }
            return new CudaGraph(arena, graph[0], graph[1]);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /**
     * Launches the graph on the current stream.
     *
     * @throws IllegalStateException if the graph was closed
     */
    public void replay() {
        if (closed) {
            throw new IllegalStateException("CudaGraph: closed");
        }
        PtNDArray a = (PtNDArray) arena;
        OperatorCall.of(Operator.CUDA_GRAPH_REPLAY).tensor(a).intArg(id).invoke(a.getManager());
    }

    /**
     * Returns the bytes of device memory the graph's temporaries hold (its arena).
     *
     * @return the arena's size
     */
    public long getArenaBytes() {
        return arena.size();
    }

    /**
     * Returns the number of nodes (kernels and copies) the graph launches per replay.
     *
     * @return the node count
     */
    public long getNodes() {
        return nodes;
    }

    /** Releases the graph and its arena. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        PtNDArray a = (PtNDArray) arena;
        try {
            OperatorCall.of(Operator.CUDA_GRAPH_RELEASE).tensor(a).intArg(id).invoke(a.getManager());
        } finally {
            arena.close();
        }
    }
}
