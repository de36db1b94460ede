/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo.args;

import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;

/**
 * The {@code Criteria} arguments a loader of the zoo reads, and the check that refuses any other.
 * DJL passes every {@code optArgument} through untouched, so without this check a misspelled
 * argument ({@code maxNewTokenz}) would be ignored and the model would load with the default.
 */
public final class KnownArguments {

    private final String loader;
    private final List<String> names;

    /**
     * Creates the list of one loader's arguments.
     *
     * @param loader what loads, as the message names it ({@code "decoder models (DecoderModels)"})
     * @param names every argument the loader reads
     */
    public KnownArguments(String loader, Collection<String> names) {
        this.loader = Objects.requireNonNull(loader, "loader");
        this.names = List.copyOf(new TreeSet<>(names));
    }

    /**
     * Returns the known argument names, sorted.
     *
     * @return the names
     */
    public List<String> names() {
        return names;
    }

    /**
     * Refuses arguments this loader does not read.
     *
     * @param args the criteria's arguments (may be empty)
     * @throws IllegalArgumentException naming the first unknown argument (in sorted order), the
     *     closest known name when one is within two edits, and every known name
     */
    public void check(Map<String, ?> args) {
        for (String key : new TreeSet<>(args.keySet())) {
            if (names.contains(key)) {
                continue;
            }
            String closest = closest(key);
            throw new IllegalArgumentException(
                    "argument "
                            + key
                            + ": unknown to "
                            + loader
                            + (closest == null ? "" : " (did you mean " + closest + "?)")
                            + "; known arguments: "
                            + String.join(", ", names));
        }
    }

    /** The known name within two edits of {@code key} (case-insensitive), or null. */
    private String closest(String key) {
        String best = null;
        int bestDistance = 3;
        for (String name : names) {
            int d = editDistance(key.toLowerCase(Locale.ROOT), name.toLowerCase(Locale.ROOT));
            if (d < bestDistance) {
                best = name;
                bestDistance = d;
            }
        }
        return best;
    }

    /** Levenshtein distance (insertions, deletions, substitutions), two rows. */
    static int editDistance(String a, String b) {
        int[] prev = new int[b.length() + 1];
        int[] cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            prev[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int substitute = prev[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                cur[j] = Math.min(substitute, Math.min(prev[j], cur[j - 1]) + 1);
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }
}
