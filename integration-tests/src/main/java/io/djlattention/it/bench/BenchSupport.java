/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/** Helpers the CPU benchmark mains share: medians, option lists, the CPU's name for the table. */
final class BenchSupport {

    private BenchSupport() {}

    /**
     * Returns the median of some values (the mean of the middle two for an even count).
     *
     * @param values at least one value
     * @return the median
     */
    static double median(List<Double> values) {
        double[] sorted = values.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }

    /**
     * Parses a comma-separated list of integers given to an option.
     *
     * @param list the list, e.g. {@code 1,32}
     * @param option the option's name, for the error
     * @return the integers
     * @throws IllegalArgumentException naming the option if an element is not an integer
     */
    static int[] ints(String list, String option) {
        try {
            return Arrays.stream(list.split(",")).mapToInt(Integer::parseInt).toArray();
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(
                    option + ": expected comma-separated integers, got " + list, e);
        }
    }

    /**
     * Returns the value that follows option {@code args[index - 1]} on a command line.
     *
     * @param args the command line
     * @param index the value's index (the option's plus one)
     * @return the value
     * @throws IllegalArgumentException naming the option if the command line ends before it
     */
    static String value(String[] args, int index) {
        if (index >= args.length) {
            throw new IllegalArgumentException(args[index - 1] + ": expected a value after it");
        }
        return args[index];
    }

    /**
     * Returns the integer that follows option {@code args[index - 1]} on a command line.
     *
     * @param args the command line
     * @param index the value's index (the option's plus one)
     * @return the integer
     * @throws IllegalArgumentException naming the option if the value is missing or no integer
     */
    static int intValue(String[] args, int index) {
        String value = value(args, index);
        try {
            return Integer.parseInt(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(
                    args[index - 1] + ": expected an integer, got " + value, e);
        }
    }

    /**
     * Returns the number that follows option {@code args[index - 1]} on a command line.
     *
     * @param args the command line
     * @param index the value's index (the option's plus one)
     * @return the number
     * @throws IllegalArgumentException naming the option if the value is missing or no number
     */
    static double doubleValue(String[] args, int index) {
        String value = value(args, index);
        try {
            return Double.parseDouble(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(
                    args[index - 1] + ": expected a number, got " + value, e);
        }
    }

    /**
     * Returns the CPU's model name from {@code /proc/cpuinfo}.
     *
     * @return the model name, or {@code unknown CPU model} off Linux
     */
    static String cpuModel() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/cpuinfo"))) {
                if (line.startsWith("model name")) {
                    return line.substring(line.indexOf(':') + 1).trim();
                }
            }
        } catch (java.io.IOException | RuntimeException e) {
            // not Linux: the table then names no model
        }
        return "unknown CPU model";
    }

    /**
     * The smallest cosine between the rows of two embedding sets of the same shape.
     *
     * @param a one set
     * @param b the other
     * @return min over rows of cos(a[i], b[i])
     */
    static double minCosine(float[][] a, float[][] b) {
        double min = 1;
        for (int i = 0; i < a.length; ++i) {
            double dot = 0;
            double na = 0;
            double nb = 0;
            for (int d = 0; d < a[i].length; ++d) {
                dot += (double) a[i][d] * b[i][d];
                na += (double) a[i][d] * a[i][d];
                nb += (double) b[i][d] * b[i][d];
            }
            min = Math.min(min, dot / Math.sqrt(na * nb));
        }
        return min;
    }
}
