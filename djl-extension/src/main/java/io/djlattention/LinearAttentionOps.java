/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

import static io.djlattention.NativeArrays.pytorchArray;

import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Activation;
import ai.djl.pytorch.engine.PtNDArray;
import ai.djl.pytorch.engine.PtNDManager;
import java.util.Arrays;

/**
 * The linear-attention family behind {@link AttentionOps}, which documents it: the causal form
 * on the {@code causal_dot_product} operator, the non-causal form in stock DJL ops (two GEMMs),
 * both with the feature map {@code elu(x) + 1} and a float32 normaliser.
 */
final class LinearAttentionOps {

    private LinearAttentionOps() {}

    static NDArray causalLinearAttention(NDArray q, NDArray k, NDArray v, float eps) {
        PtNDArray ptQ = pytorchArray(q, "q");
        pytorchArray(k, "k");
        pytorchArray(v, "v");
        checkEps(eps);
        NDManager target = ptQ.getManager();
        try (PtNDManager scope = (PtNDManager) target.newSubManager()) {
            boolean widen = allFloat16(q, k, v);
            NDArray phiQ = featureMap(widen(inScope(scope, q), widen));
            NDArray phiK = featureMap(widen(inScope(scope, k), widen));
            NDArray values = widen(inScope(scope, v), widen);
            // The operator first: it validates q, k and v before any DJL op sees their shapes.
            NDArray numerator =
                    OperatorCall.of(Operator.CAUSAL_DOT_PRODUCT)
                            .tensor((PtNDArray) phiQ)
                            .tensor((PtNDArray) phiK)
                            .tensor((PtNDArray) values)
                            .invoke(scope)[0];
            // φ(q_j)·Σ_{i≤j} φ(k_i) + eps, [B, H, L, 1], as a float32 prefix sum.
            NDArray keySums = phiK.toType(DataType.FLOAT32, false).cumSum(2);
            NDArray normaliser =
                    phiQ.toType(DataType.FLOAT32, false)
                            .mul(keySums)
                            .sum(new int[] {3}, true)
                            .add(eps);
            NDArray out =
                    numerator
                            .toType(DataType.FLOAT32, false)
                            .div(normaliser)
                            .toType(q.getDataType(), false);
            out.attach(target);
            return out;
        }
    }

    static NDArray linearAttention(NDArray q, NDArray k, NDArray v, float eps) {
        PtNDArray ptQ = pytorchArray(q, "q");
        pytorchArray(k, "k");
        pytorchArray(v, "v");
        checkEps(eps);
        checkLinearAttentionArgs(q, k, v);
        NDManager target = ptQ.getManager();
        try (NDManager scope = target.newSubManager()) {
            NDArray phiQ = featureMap(widen(inScope(scope, q), true));
            NDArray phiK = featureMap(widen(inScope(scope, k), true));
            NDArray values = widen(inScope(scope, v), true);
            NDArray state = phiK.transpose(0, 1, 3, 2).matMul(values); // [B, H, E, M]
            NDArray keySum = phiK.sum(new int[] {2}, true).transpose(0, 1, 3, 2); // [B, H, E, 1]
            NDArray normaliser = phiQ.matMul(keySum).add(eps); // [B, H, L, 1]
            NDArray out = phiQ.matMul(state).div(normaliser).toType(q.getDataType(), false);
            out.attach(target);
            return out;
        }
    }

    /** The feature map of linear attention, {@code elu(x) + 1} (positive everywhere). */
    private static NDArray featureMap(NDArray x) {
        return Activation.elu(x, 1f).add(1f);
    }

    private static void checkEps(float eps) {
        if (!Float.isFinite(eps) || eps < 0) {
            throw new IllegalArgumentException("eps: expected a finite value >= 0, got " + eps);
        }
    }

    private static boolean allFloat16(NDArray... arrays) {
        for (NDArray array : arrays) {
            if (array.getDataType() != DataType.FLOAT16) {
                return false;
            }
        }
        return true;
    }

    private static NDArray widen(NDArray array, boolean toFloat32) {
        return toFloat32 ? array.toType(DataType.FLOAT32, false) : array;
    }

    /**
     * A view of an input (same data, shape and strides) attached to the call's scope, so that
     * everything computed from it lands there and is freed with it. The input itself is left
     * alone: other threads may be reading it, so it is never moved between managers.
     */
    private static NDArray inScope(NDManager scope, NDArray input) {
        NDArray view = input.reshape(input.getShape());
        view.attach(scope);
        return view;
    }

    /** The rules of {@code linearAttention}, which has no native operator to check them. */
    private static void checkLinearAttentionArgs(NDArray q, NDArray k, NDArray v) {
        String op = "linear_attention: ";
        Shape qs = checkRank(op, q, "q", "[B, H, L, E]");
        Shape ks = checkRank(op, k, "k", "[B, H, S, E]");
        Shape vs = checkRank(op, v, "v", "[B, H, S, M]");
        checkSize(op, "k", ks, 0, "B", qs.get(0), "the batch of q");
        checkSize(op, "k", ks, 1, "H", qs.get(1), "the heads of q");
        checkSize(op, "k", ks, 3, "E", qs.get(3), "the feature dim of q");
        checkSize(op, "v", vs, 0, "B", qs.get(0), "the batch of q");
        checkSize(op, "v", vs, 1, "H", qs.get(1), "the heads of q");
        checkSize(op, "v", vs, 2, "S", ks.get(2), "the length of k");
        DataType dtype = q.getDataType();
        if (dtype != DataType.FLOAT32 && dtype != DataType.FLOAT16) {
            throw new IllegalArgumentException(
                    op + "q: expected dtype in {float32, float16}, got " + dtype);
        }
        for (NDArray other : new NDArray[] {k, v}) {
            if (other.getDataType() != dtype) {
                throw new IllegalArgumentException(
                        op
                                + (other == k ? "k" : "v")
                                + ": expected the dtype of q ("
                                + dtype
                                + "), got "
                                + other.getDataType());
            }
            if (!other.getDevice().equals(q.getDevice())) {
                throw new IllegalArgumentException(
                        op
                                + (other == k ? "k" : "v")
                                + ": expected the device of q ("
                                + q.getDevice()
                                + "), got "
                                + other.getDevice());
            }
        }
    }

    private static Shape checkRank(String op, NDArray array, String name, String layout) {
        Shape shape = array.getShape();
        if (shape.dimension() != 4) {
            throw new IllegalArgumentException(
                    op
                            + name
                            + ": expected 4 dims "
                            + layout
                            + ", got "
                            + shape.dimension()
                            + " dims with shape "
                            + Arrays.toString(shape.getShape()));
        }
        return shape;
    }

    private static void checkSize(
            String op, String name, Shape shape, int axis, String dim, long want, String what) {
        if (shape.get(axis) != want) {
            throw new IllegalArgumentException(
                    op
                            + name
                            + ": expected size "
                            + want
                            + " for "
                            + dim
                            + " ("
                            + what
                            + "), got "
                            + shape.get(axis));
        }
    }
}
