/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * The API keys a server accepts as {@code Authorization: Bearer <key>}. Keys are kept as SHA-256
 * digests and a presented key is compared with every one by {@link MessageDigest#isEqual} (constant
 * time in the digest, whatever the key's length or which key matches), so response times do not
 * tell an attacker how much of a guess was right.
 */
public final class ApiKeys {

    private static final ApiKeys NONE = new ApiKeys(List.of());

    private final List<byte[]> digests;

    private ApiKeys(List<byte[]> digests) {
        this.digests = digests;
    }

    /**
     * Returns the empty set: no authentication.
     *
     * @return the keys
     */
    public static ApiKeys none() {
        return NONE;
    }

    /**
     * Returns a set of keys.
     *
     * @param keys non-blank keys, at least one
     * @return the keys
     * @throws IllegalArgumentException if there is none or one is blank or holds white space
     */
    public static ApiKeys of(Collection<String> keys) {
        if (keys.isEmpty()) {
            throw new IllegalArgumentException("api keys: expected at least one key, got none");
        }
        List<byte[]> d = new ArrayList<>();
        for (String k : keys) {
            if (k.isBlank() || !k.strip().equals(k) || k.chars().anyMatch(Character::isWhitespace)) {
                throw new IllegalArgumentException(
                        "api keys: a key must be non-empty without white space");
            }
            d.add(sha256(k));
        }
        return new ApiKeys(List.copyOf(d));
    }

    /**
     * Reads keys from a file: one per line; blank lines and lines starting with {@code #} are
     * skipped.
     *
     * @param file the file
     * @return the keys
     * @throws IOException if it cannot be read
     * @throws IllegalArgumentException if it holds no key (the message names the file)
     */
    public static ApiKeys fromFile(Path file) throws IOException {
        List<String> keys = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
            String k = line.strip();
            if (!k.isEmpty() && !k.startsWith("#")) {
                keys.add(k);
            }
        }
        if (keys.isEmpty()) {
            throw new IllegalArgumentException(file + ": holds no API key");
        }
        return of(keys);
    }

    /**
     * Returns whether any key is required.
     *
     * @return true if requests must carry a key
     */
    public boolean isEnabled() {
        return !digests.isEmpty();
    }

    /**
     * Checks a request's {@code Authorization} header.
     *
     * @param authorization the header, or null
     * @throws ApiException 401 if keys are required and the header does not carry one of them
     */
    void check(String authorization) throws ApiException {
        if (digests.isEmpty()) {
            return;
        }
        if (authorization == null
                || authorization.length() < 7
                || !authorization.regionMatches(true, 0, "Bearer ", 0, 7)) {
            throw new ApiException(
                    401,
                    "invalid_request_error",
                    null,
                    "missing API key: send the header Authorization: Bearer <key>");
        }
        byte[] got = sha256(authorization.substring(7).strip());
        boolean ok = false;
        for (byte[] d : digests) {
            ok |= MessageDigest.isEqual(d, got); // no early exit: every key is compared
        }
        if (!ok) {
            throw new ApiException(401, "invalid_request_error", null, "invalid API key");
        }
    }

    private static byte[] sha256(String s) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is part of every Java runtime", e);
        }
    }
}
