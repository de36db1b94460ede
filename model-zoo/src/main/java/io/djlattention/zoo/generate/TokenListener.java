/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.generate;

/**
 * Receives each generated token as soon as it is sampled: one call per token, in order, on the
 * thread that runs the scheduler (keep it short: hand the token to another thread to do I/O).
 */
@FunctionalInterface
public interface TokenListener {

    /**
     * Called once per generated token.
     *
     * @param requestId the request's id
     * @param tokenId the token just sampled (the EOS or stop token included)
     */
    void onToken(long requestId, int tokenId);
}
