/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

/**
 * The djl-attention command line: {@code embed}, {@code generate}, {@code serve}, {@code
 * spark-embed}, {@code spark-generate}, and {@code all}
 * ({@code embed} then {@code generate}, also what runs without a subcommand). The README's main
 * job ({@code mvn -B -Pdemo -DskipTests verify}, or {@code java -jar
 * app/target/djl-attention-app.jar}) runs it.
 *
 * <p>Exit codes: 0 success, 1 a parity check failed, 2 bad options or input.
 */
@Command(
        name = "djl-attention",
        mixinStandardHelpOptions = true,
        version = "djl-attention 0.1.0-SNAPSHOT",
        description = {
            "Real models on DJL's PyTorch engine with fused attention kernels.",
            "Without a subcommand: embed, then generate, then a summary."
        },
        subcommands = {
            EmbedCommand.class,
            GenerateCommand.class,
            ServeCommand.class,
            SparkEmbedCommand.class,
            SparkGenerateCommand.class,
            Main.AllCommand.class,
            CommandLine.HelpCommand.class
        })
public final class Main implements Callable<Integer> {

    @Spec CommandSpec spec;

    @Mixin RuntimeOptions runtime;

    @Option(
            names = {"-m", "--model"},
            paramLabel = "PATH",
            description = "generate's decoder checkpoint (default: the built-in stories260K)")
    Path model;

    /**
     * Runs the command line and exits with its code.
     *
     * @param args the arguments
     */
    public static void main(String[] args) {
        // Everything the commands need is on the class path: DJL must not try the network.
        if (System.getProperty("ai.djl.offline") == null) {
            System.setProperty("ai.djl.offline", "true");
        }
        // spark-embed / spark-generate start Spark in this JVM: what Spark's launcher sets (the
        // manifest's Add-Opens give it the module access it needs on Java 17).
        if (System.getProperty("io.netty.tryReflectionSetAccessible") == null) {
            System.setProperty("io.netty.tryReflectionSetAccessible", "true");
        }
        int code = run(new PrintWriter(System.out, true), new PrintWriter(System.err, true), args);
        System.exit(code);
    }

    /**
     * Runs the command line, writing to the given streams.
     *
     * @param out standard output
     * @param err standard error
     * @param args the arguments
     * @return the exit code
     */
    public static int run(PrintWriter out, PrintWriter err, String... args) {
        CommandLine cl = commandLine(new Main(), out, err);
        return cl.execute(args);
    }

    private static CommandLine commandLine(Object command, PrintWriter out, PrintWriter err) {
        CommandLine cl = new CommandLine(command);
        cl.setOut(out);
        cl.setErr(err);
        // Failures other than bad options (a missing file, a checkpoint that does not load): the
        // message and its causes, no stack trace, exit code 2.
        cl.setExecutionExceptionHandler(
                (e, line, parse) -> {
                    PrintWriter w = line.getErr();
                    w.println(line.getCommandName() + ": error: " + describe(e));
                    w.flush();
                    return 2;
                });
        return cl;
    }

    private static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder(String.valueOf(e.getMessage()));
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            if (c.getMessage() != null && !sb.toString().contains(c.getMessage())) {
                sb.append("\n  caused by: ").append(c.getMessage());
            }
        }
        return sb.toString();
    }

    @Override
    public Integer call() {
        return runAll(spec, runtime, model);
    }

    /** {@code all}: embed, then generate, then one summary table. */
    @Command(
            name = "all",
            mixinStandardHelpOptions = true,
            description = "Run embed, then generate (with their defaults), then a summary table.")
    static final class AllCommand implements Callable<Integer> {

        @Spec CommandSpec spec;

        @Mixin RuntimeOptions runtime;

        @Option(
                names = {"-m", "--model"},
                paramLabel = "PATH",
                description = "generate's decoder checkpoint (default: the built-in stories260K)")
        Path model;

        @Override
        public Integer call() {
            return runAll(spec, runtime, model);
        }
    }

    private static int runAll(CommandSpec spec, RuntimeOptions runtime, Path model) {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        List<String> common = new ArrayList<>();
        if (runtime.device != null) {
            common.add("--device=" + runtime.device);
        }
        common.add("--dtype=" + runtime.dtype);
        if (runtime.threads != null) {
            common.add("--threads=" + runtime.threads);
        }
        out.println("== embed ==");
        EmbedCommand embed = new EmbedCommand();
        int embedCode = commandLine(embed, out, err).execute(common.toArray(new String[0]));
        out.println();
        out.println("== generate ==");
        List<String> genArgs = new ArrayList<>(common);
        if (model != null) {
            genArgs.add("--model=" + model);
        }
        GenerateCommand generate = new GenerateCommand();
        int generateCode = commandLine(generate, out, err).execute(genArgs.toArray(new String[0]));

        out.println();
        out.println("== summary ==");
        Table summary = new Table("job", "result", "throughput", "parity");
        if (embed.report != null) {
            EmbedCommand.Report r = embed.report;
            summary.row(
                    "embed: all-MiniLM-L6-v2, " + r.sentences() + " sentences, " + r.dims() + " dims",
                    embedCode == 0 ? "ok" : "exit " + embedCode,
                    String.format(
                            Locale.ROOT,
                            "%.1f sentences/s fused (%.2fx stock DJL, %.2fx ONNX Runtime on"
                                    + " length-sorted batches)",
                            r.fusedPerSecond(),
                            r.fusedPerSecond() / r.stockPerSecond(),
                            r.fusedPerSecond() / r.ortSortedPerSecond()),
                    String.format(
                            Locale.ROOT,
                            "1 - min cosine %.1e vs ONNX Runtime: %s",
                            1 - r.minCosine(),
                            r.parity() ? "pass" : "FAIL"));
        } else {
            summary.row("embed", "exit " + embedCode, "-", "-");
        }
        if (generate.report != null) {
            GenerateCommand.Report r = generate.report;
            summary.row(
                    "generate: " + r.model() + ", " + r.requests() + " requests",
                    generateCode == 0 ? "ok" : "exit " + generateCode,
                    String.format(
                            Locale.ROOT,
                            "%.1f tokens/s; KV blocks %d of %d preallocated (%.1f %%)",
                            r.generatedTokens() / r.seconds(),
                            r.peakBlocks(),
                            r.preallocatedBlocks(),
                            100.0 * r.peakBlocks() / r.preallocatedBlocks()),
                    "request 0 vs stock path: " + (r.parity() ? "identical" : "DIFFERENT"));
        } else {
            summary.row("generate", "exit " + generateCode, "-", "-");
        }
        summary.print(out);
        return Math.max(embedCode, generateCode);
    }
}
