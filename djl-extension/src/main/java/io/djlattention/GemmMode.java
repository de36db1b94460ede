/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention;

/**
 * The arithmetic of the CPU fused layers' GEMMs ({@link EncoderLayerOps#packWeight}); everything
 * else in a layer (attention, LayerNorm, GELU, residuals) stays float32.
 */
public enum GemmMode {
    /** float32 weights in MKL's packed layout (where libtorch carries MKL): the default. */
    FLOAT32(0),
    /**
     * bfloat16 weights; each GEMM rounds its activations to bfloat16 and accumulates in float32
     * (libtorch's bfloat16 {@code mm}: oneDNN, AMX where the CPU has it). Opt-in.
     */
    BFLOAT16(1),
    /**
     * Dynamic int8 quantization: weights quantized once per output channel (symmetric, scale
     * {@code max |w_j| / 127}), activations per row at every GEMM (symmetric, scale {@code max
     * |x_r| / 127}), int8 products accumulated in int32 (libtorch's {@code _int_mm}: oneDNN,
     * AMX or VNNI where the CPU has them), rescaled to float32. Opt-in.
     */
    INT8(2);

    private final int code;

    GemmMode(int code) {
        this.code = code;
    }

    /** The {@code mode} argument of {@code gemm_pack_weight}. */
    int code() {
        return code;
    }
}
