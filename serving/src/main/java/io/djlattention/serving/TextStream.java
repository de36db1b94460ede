/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;

import java.util.Arrays;
import java.util.List;

/**
 * The text layer of one completion: turns generated token ids into text pieces as they arrive and
 * watches for stop strings. The whole generation is decoded again at each token (a token's text
 * depends on its neighbours in byte-level and SentencePiece tokenizers); text ending in an
 * incomplete UTF-8 sequence (U+FFFD) is held back until the next token completes it, and with stop
 * strings the last {@code longest stop - 1} characters are held back too, so no emitted piece is
 * ever part of a stop string. Used on one thread at a time.
 */
final class TextStream {

    private final HuggingFaceTokenizer tokenizer;
    private final List<String> stops;
    private final int holdBack;
    private long[] ids = new long[16];
    private int numIds;
    private String text = "";
    private String latest = "";
    private int emitted;
    private boolean stopped;

    /**
     * Creates the text layer of one completion.
     *
     * @param tokenizer the model's tokenizer, or null (then every piece is empty)
     * @param stops stop strings (need a tokenizer)
     */
    TextStream(HuggingFaceTokenizer tokenizer, List<String> stops) {
        this.tokenizer = tokenizer;
        this.stops = stops;
        int longest = 0;
        for (String s : stops) {
            longest = Math.max(longest, s.length());
        }
        this.holdBack = Math.max(0, longest - 1);
    }

    /**
     * Adds a generated token.
     *
     * @param token the token id
     * @return the text that may now be sent (possibly empty)
     */
    String add(int token) {
        if (stopped) {
            return "";
        }
        if (numIds == ids.length) {
            ids = Arrays.copyOf(ids, 2 * numIds);
        }
        ids[numIds++] = token;
        if (tokenizer == null) {
            return "";
        }
        latest = tokenizer.decode(Arrays.copyOf(ids, numIds), true);
        if (latest.endsWith("\uFFFD")) {
            return ""; // an incomplete UTF-8 sequence: wait for the next token
        }
        text = latest;
        return check();
    }

    /** Cuts at the first stop string, else returns what is safe to send. */
    private String check() {
        int cut = -1;
        for (String s : stops) {
            int i = text.indexOf(s);
            if (i >= 0 && (cut < 0 || i < cut)) {
                cut = i;
            }
        }
        if (cut >= 0) {
            stopped = true;
            text = text.substring(0, cut);
            return take(text.length());
        }
        int safe = text.length() - holdBack;
        if (safe > 0 && safe < text.length() && Character.isHighSurrogate(text.charAt(safe - 1))) {
            --safe;
        }
        return take(safe);
    }

    /**
     * Returns the text held back, at the end of the generation.
     *
     * @return the rest of the text
     */
    String flush() {
        if (stopped) {
            return "";
        }
        text = latest; // the end: an incomplete UTF-8 sequence stays as U+FFFD, as decode gives it
        String piece = check();
        return stopped ? piece : piece + take(text.length());
    }

    private String take(int upTo) {
        int from = Math.min(emitted, text.length());
        if (upTo <= from) {
            return "";
        }
        emitted = upTo;
        return text.substring(from, upTo);
    }

    /**
     * Returns whether a stop string was generated.
     *
     * @return true once stopped
     */
    boolean isStopped() {
        return stopped;
    }

    /**
     * Returns the tokens consumed (up to and including the one that completed a stop string).
     *
     * @return the token count
     */
    int getNumTokens() {
        return numIds;
    }

    /**
     * Returns the token ids consumed.
     *
     * @return the ids
     */
    int[] getTokenIds() {
        int[] out = new int[numIds];
        for (int i = 0; i < numIds; ++i) {
            out[i] = (int) ids[i];
        }
        return out;
    }

    /**
     * Returns the generation's text so far (cut before a stop string).
     *
     * @return the text
     */
    String getText() {
        return text;
    }
}
