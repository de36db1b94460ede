/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.paged;

/**
 * A copy-on-write copy the KV data must undergo: every layer's key and value block {@code source}
 * copied into block {@code destination}, before new tokens are written there.
 *
 * @param source the shared block
 * @param destination the new, private block
 */
public record BlockCopy(int source, int destination) {}
