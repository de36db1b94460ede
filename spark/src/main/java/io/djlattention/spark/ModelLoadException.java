/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

/**
 * A model that cannot load: the message names the model, the device and the loader's reason.
 * Thrown on the driver before a job starts (the transformers load the model there first), and by
 * a task whose executor cannot load it.
 */
public final class ModelLoadException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param key the model, device and options that failed
     * @param cause the loader's error
     */
    public ModelLoadException(String key, Throwable cause) {
        super("cannot load model " + key + ": " + reason(cause), cause);
    }

    private static String reason(Throwable e) {
        StringBuilder sb = new StringBuilder(String.valueOf(e.getMessage()));
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            if (c.getMessage() != null && !sb.toString().contains(c.getMessage())) {
                sb.append("; caused by: ").append(c.getMessage());
            }
        }
        return sb.toString();
    }
}
