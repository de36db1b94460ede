/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.serving;

import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * A greedy completion whose tokens differ from the same request run alone. Batched and solo runs
 * round the logits differently (the GEMMs block over the batch; a preempted sequence is recomputed
 * by a prefill instead of the decode steps that made its cache), so a greedy run may leave the solo
 * run where the solo run's own top two logits are a float32 tie, and nowhere else.
 *
 * @param spec the request's index among the test's specs
 * @param stream whether the request streamed
 * @param want the solo run's tokens
 * @param got the batched run's tokens
 */
record SoloDivergence(int spec, boolean stream, int[] want, int[] got) {

    /**
     * The largest gap between the top logit and the batched run's choice that float32 rounding of
     * a batched step explains: logits of stories260K reach about 15 and the batched GEMMs sum in
     * another order than the solo ones (measured differences up to ~1e-5).
     */
    static final float TIE = 1e-3f;

    /**
     * The most specs of a test that may leave their solo run at a tie: one in eight. Ties are
     * counted per spec, not per completion: a spec whose solo run passes a tie may leave it on
     * every repeat. More than this says the tie bound is too loose to mean anything.
     *
     * @param specs the specs the test drew its requests from
     * @return the bound
     */
    static int maxTiedSpecs(List<Requests.Spec> specs) {
        return specs.size() / 8;
    }

    /**
     * Explains each divergence against the solo run's own logits: adds what a tie does not
     * explain to {@code failures} and returns the specs that left their solo run at a tie.
     *
     * @param divergences the completions that differ from their solo runs
     * @param specs the specs the divergences index
     * @param failures where unexplained divergences go
     * @return the indices of the specs that diverged at a tie
     * @throws Exception if a reference forward pass fails
     */
    static Set<Integer> tiedSpecs(
            Collection<SoloDivergence> divergences,
            List<Requests.Spec> specs,
            Collection<String> failures)
            throws Exception {
        Set<Integer> tied = new HashSet<>();
        for (SoloDivergence d : divergences) {
            String unexplained = d.explain(specs.get(d.spec()).prompt());
            if (unexplained == null) {
                tied.add(d.spec());
            } else {
                failures.add(unexplained);
            }
        }
        return tied;
    }

    /**
     * Returns null when the first differing token is a float32 tie of the solo run's own logits
     * (recomputed on the stock contiguous path, alone), else why it is not.
     *
     * @param prompt the request's prompt ids
     * @return null for a tie, else the reason the divergence is real
     * @throws Exception if the reference forward pass fails
     */
    String explain(int[] prompt) throws Exception {
        int t = 0;
        while (t < Math.min(want.length, got.length) && want[t] == got[t]) {
            ++t;
        }
        String what =
                "spec " + spec + (stream ? " (streamed)" : "") + ": expected "
                        + Arrays.toString(want) + ", got " + Arrays.toString(got);
        if (t == Math.min(want.length, got.length)) {
            return what + " (lengths differ)";
        }
        int[] ids = Arrays.copyOf(prompt, prompt.length + t);
        System.arraycopy(want, 0, ids, prompt.length, t);
        float[] logits = ServingModels.referenceLogits(ids);
        float best = Float.NEGATIVE_INFINITY;
        for (float v : logits) {
            best = Math.max(best, v);
        }
        float gap = best - logits[got[t]];
        return gap <= TIE
                ? null
                : what + " (token " + t + ": the batched choice is " + gap
                        + " below the top logit, no float32 tie)";
    }
}
