/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** A plain-text table (Markdown pipe syntax, columns padded) for the commands' reports. */
final class Table {

    private final String[] header;
    private final List<String[]> rows = new ArrayList<>();

    Table(String... header) {
        this.header = header;
    }

    Table row(Object... cells) {
        if (cells.length != header.length) {
            throw new IllegalArgumentException(
                    "row: expected " + header.length + " cells, got " + cells.length);
        }
        rows.add(Arrays.stream(cells).map(String::valueOf).toArray(String[]::new));
        return this;
    }

    void print(PrintWriter out) {
        int[] width = new int[header.length];
        for (int c = 0; c < header.length; ++c) {
            width[c] = header[c].length();
            for (String[] r : rows) {
                width[c] = Math.max(width[c], r[c].length());
            }
        }
        line(out, header, width);
        StringBuilder rule = new StringBuilder("|");
        for (int w : width) {
            rule.append(" ").append("-".repeat(w)).append(" |");
        }
        out.println(rule);
        for (String[] r : rows) {
            line(out, r, width);
        }
        out.flush();
    }

    private static void line(PrintWriter out, String[] cells, int[] width) {
        StringBuilder sb = new StringBuilder("|");
        for (int c = 0; c < cells.length; ++c) {
            sb.append(' ').append(cells[c]).append(" ".repeat(width[c] - cells[c].length()));
            sb.append(" |");
        }
        out.println(sb);
    }
}
