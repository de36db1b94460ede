/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.decoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.djlattention.zoo.decoder.DecoderConfig;

import org.junit.jupiter.api.Test;

import java.util.function.UnaryOperator;

/**
 * The attention options of {@link DecoderConfig}: how a sliding window of W keys maps to the
 * operators' window left on the layers it applies to, the default scale, and a clear error for
 * each bad value.
 */
class DecoderConfigTest {

    private static DecoderConfig.Builder base() {
        return DecoderConfig.builder()
                .setArchitecture(DecoderConfig.Architecture.GEMMA2)
                .setVocabSize(32)
                .setHiddenSize(64)
                .setIntermediateSize(96)
                .setNumLayers(3)
                .setNumHeads(4);
    }

    @Test
    void windowOfWKeysIsWindowLeftWMinusOneOnItsLayers() {
        DecoderConfig all = base().optSlidingWindow(7).build();
        DecoderConfig some =
                base().optSlidingWindow(7).optSlidingLayers(false, true, false).build();
        DecoderConfig none = base().build();
        for (int l = 0; l < 3; ++l) {
            assertEquals(6, all.getWindowLeft(l));
            assertEquals(l == 1 ? 6 : -1, some.getWindowLeft(l));
            assertEquals(-1, none.getWindowLeft(l));
        }
        // Layers marked local without a window stay global.
        assertEquals(-1, base().optSlidingLayers(true, true, true).build().getWindowLeft(0));
        // toBuilder keeps every option.
        DecoderConfig copy = some.toBuilder().build();
        assertEquals(6, copy.getWindowLeft(1));
        assertEquals(-1, copy.getWindowLeft(0));
    }

    @Test
    void scaleDefaultsToInverseSqrtHeadDim() {
        assertEquals(1 / Math.sqrt(16), base().build().getAttentionScale(), 1e-15);
        assertEquals(0.25 / 3, base().optAttentionScale(0.25 / 3).build().getAttentionScale());
        DecoderConfig capped = base().optAttentionSoftcap(50f).optFinalSoftcap(30f).build();
        assertEquals(50f, capped.getAttentionSoftcap());
        assertEquals(30f, capped.toBuilder().build().getFinalSoftcap());
    }

    @Test
    void badOptionsAreNamed() {
        expectError(b -> b.optSlidingWindow(-1), "optSlidingWindow", "-1");
        expectError(b -> b.optSlidingLayers(true, false), "optSlidingLayers", "(3)", "2");
        expectError(b -> b.optAttentionScale(-0.5), "optAttentionScale", "-0.5");
        expectError(b -> b.optAttentionScale(Double.NaN), "optAttentionScale", "NaN");
        expectError(b -> b.optAttentionSoftcap(-1f), "optAttentionSoftcap", "-1.0");
        expectError(
                b -> b.optFinalSoftcap(Float.POSITIVE_INFINITY), "optFinalSoftcap", "Infinity");
        expectError(b -> b.optHeadDim(15), "even head dim", "15");
    }

    private static void expectError(UnaryOperator<DecoderConfig.Builder> edit, String... parts) {
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> edit.apply(base()).build());
        for (String p : parts) {
            assertTrue(e.getMessage().contains(p), "'" + e.getMessage() + "' lacks '" + p + "'");
        }
    }
}
