/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.serving;

import io.djlattention.zoo.generate.LatencyHistogram;

/** Writes the Prometheus text exposition format (version 0.0.4). */
final class PrometheusText {

    private final StringBuilder out = new StringBuilder(4096);

    void header(String name, String help, String type) {
        out.append("# HELP ").append(name).append(' ').append(help).append('\n');
        out.append("# TYPE ").append(name).append(' ').append(type).append('\n');
    }

    void sample(String nameAndLabels, double value) {
        out.append(nameAndLabels).append(' ').append(format(value)).append('\n');
    }

    void gauge(String name, String help, double value) {
        header(name, help, "gauge");
        sample(name, value);
    }

    void counter(String name, String help, double value) {
        header(name, help, "counter");
        sample(name, value);
    }

    void histogram(String name, String help, LatencyHistogram h) {
        header(name, help, "histogram");
        double[] bounds = h.getBounds();
        long[] cumulative = h.getCumulativeCounts();
        for (int i = 0; i < bounds.length; ++i) {
            sample(name + "_bucket{le=\"" + format(bounds[i]) + "\"}", cumulative[i]);
        }
        sample(name + "_bucket{le=\"+Inf\"}", cumulative[bounds.length]);
        sample(name + "_sum", h.getSum());
        sample(name + "_count", cumulative[bounds.length]);
    }

    private static String format(double v) {
        if (v == Math.rint(v) && Math.abs(v) < 1e15) {
            return Long.toString((long) v);
        }
        return Double.toString(v);
    }

    @Override
    public String toString() {
        return out.toString();
    }
}
