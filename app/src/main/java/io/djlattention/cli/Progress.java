/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import me.tongfei.progressbar.ConsoleProgressBarConsumer;
import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;

/**
 * Progress bars for the steps that take more than a second, on standard error so that standard
 * output holds only the reports.
 */
final class Progress {

    /** A fixed width: asking a non-terminal (CI logs, pipes) for its width only logs a warning. */
    private static final int WIDTH = 100;

    private Progress() {}

    /**
     * Starts a bar.
     *
     * @param task the step's name
     * @param max the number of units, or -1 for an indefinite bar
     * @param unit the unit's name (sentences, tokens, ...)
     * @return the bar; close it when the step ends
     */
    static ProgressBar start(String task, long max, String unit) {
        return new ProgressBarBuilder()
                .setTaskName(task)
                .setInitialMax(max)
                .setUnit(" " + unit, 1)
                .setStyle(ProgressBarStyle.ASCII)
                .setUpdateIntervalMillis(250)
                .setConsumer(new ConsoleProgressBarConsumer(System.err, WIDTH))
                .build();
    }
}
