/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

/**
 * A request the server answers with an error status and an OpenAI-style JSON error body {@code
 * {"error": {"message", "type", "param", "code"}}}; {@code param} names the offending field.
 */
public final class ApiException extends Exception {

    private static final long serialVersionUID = 1L;

    private final int status;
    private final String type;
    private final String param;

    /**
     * Creates an error.
     *
     * @param status the HTTP status
     * @param type the error type ({@code invalid_request_error}, {@code not_found_error}, ...)
     * @param param the request field at fault, or null
     * @param message the message, which names the field when there is one
     */
    public ApiException(int status, String type, String param, String message) {
        super(message);
        this.status = status;
        this.type = type;
        this.param = param;
    }

    /**
     * Returns a {@code 400 invalid_request_error} naming {@code param}.
     *
     * @param param the field at fault
     * @param message what is wrong; prefixed with the field's name
     * @return the error
     */
    public static ApiException badField(String param, String message) {
        return new ApiException(400, "invalid_request_error", param, param + ": " + message);
    }

    /**
     * Returns the HTTP status.
     *
     * @return the status
     */
    public int getStatus() {
        return status;
    }

    /**
     * Returns the error type.
     *
     * @return the type
     */
    public String getType() {
        return type;
    }

    /**
     * Returns the field at fault.
     *
     * @return the field name, or null
     */
    public String getParam() {
        return param;
    }
}
