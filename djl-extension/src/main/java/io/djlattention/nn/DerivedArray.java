/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.nn;

import ai.djl.ndarray.NDArray;
import java.util.function.Function;

/**
 * An array computed from parameter arrays (a concatenated QKV weight, a folded BatchNorm, a float16
 * copy), rebuilt when a source array is replaced (loading, {@code setArray}), when the requested
 * dtype changes, or after {@link #invalidate()} (a training step may have updated the sources in
 * place).
 */
final class DerivedArray {

    private NDArray[] sources;
    private Object key;
    private NDArray value;
    private boolean owned;

    /**
     * Returns the derived array for these sources, building it when needed.
     *
     * @param key what else the value depends on (a dtype), compared with equals
     * @param make builds the value; it may return one of the sources itself
     * @param current the source arrays
     */
    synchronized NDArray get(Object key, Function<NDArray[], NDArray> make, NDArray... current) {
        if (value != null && sameSources(current) && java.util.Objects.equals(key, this.key)) {
            return value;
        }
        release();
        NDArray made = make.apply(current);
        owned = true;
        for (NDArray source : current) {
            if (source == made) {
                owned = false;
            }
        }
        sources = current.clone();
        this.key = key;
        value = made;
        return made;
    }

    /** Forgets the value: the next {@link #get} rebuilds it. */
    synchronized void invalidate() {
        release();
    }

    private boolean sameSources(NDArray[] current) {
        if (sources == null || sources.length != current.length) {
            return false;
        }
        for (int i = 0; i < current.length; ++i) {
            if (sources[i] != current[i] || current[i] == null || current[i].isReleased()) {
                return false;
            }
        }
        return true;
    }

    private void release() {
        if (value != null && owned && !value.isReleased()) {
            value.close();
        }
        value = null;
        sources = null;
        key = null;
    }
}
