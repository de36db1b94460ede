/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

/**
 * What a forward step reads back: every sequence's logits row, or, when no sequence of the
 * step samples, only each row's argmax (computed where the logits are, so a GPU step copies
 * {@code numSeqs} ids to the host instead of {@code numSeqs × V} floats).
 */
final class StepOutput {
    /** {@code [numSeqs * V]}, or null when {@link #argMax} holds the tokens. */
    final float[] logits;
    /** The first maximum of each row, or null. */
    final long[] argMax;

    StepOutput(float[] logits, long[] argMax) {
        this.logits = logits;
        this.argMax = argMax;
    }
}
