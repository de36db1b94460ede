/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.djlattention.cli.Main;
import io.djlattention.it.HfFixtures;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The command line as a user runs it: help, a small {@code generate} end to end (its parity check
 * against the stock path must pass), and bad options or input exiting non-zero with a message.
 */
class MainTest {

    @TempDir Path tmp;

    /** What one run printed, and its exit code. */
    private record Run(int code, String out, String err) {
        String all() {
            return out + err;
        }
    }

    private static Run run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Main.run(new PrintWriter(out, true), new PrintWriter(err, true), args);
        return new Run(code, out.toString(), err.toString());
    }

    @Test
    void helpListsSubcommandsAndOptions() {
        Run r = run("--help");
        assertEquals(0, r.code(), r.all());
        for (String s : new String[] {"embed", "generate", "serve", "--device", "--dtype", "--threads"}) {
            assertTrue(r.out().contains(s), s + " missing from:\n" + r.out());
        }
        Run g = run("generate", "--help");
        assertEquals(0, g.code(), g.all());
        for (String s :
                new String[] {"--model", "--batch-size", "--max-prompt-length", "--max-new-tokens"}) {
            assertTrue(g.out().contains(s), s + " missing from:\n" + g.out());
        }
        Run e = run("embed", "--help");
        assertEquals(0, e.code(), e.all());
        for (String s : new String[] {"--sentences", "--batch-size", "--max-length", "--threads"}) {
            assertTrue(e.out().contains(s), s + " missing from:\n" + e.out());
        }
    }

    @Test
    void generateServesRequestsAndMatchesTheStockPath() {
        Run r =
                run(
                        "generate",
                        "--requests=5",
                        "--max-new-tokens=8",
                        "--max-prompt-length=20",
                        "--batch-size=3",
                        "--device=cpu");
        assertEquals(0, r.code(), r.all());
        assertTrue(r.out().contains("generated tokens/s"), r.out());
        assertTrue(r.out().contains("paged: peak used"), r.out());
        assertTrue(r.out().contains("max-length preallocation (3 x 512 positions)"), r.out());
        assertTrue(r.out().contains("| identical |"), r.out());
    }

    @Test
    void generateWithAnFp8Cache() {
        Run r =
                run(
                        "generate",
                        "--requests=3",
                        "--max-new-tokens=6",
                        "--max-prompt-length=12",
                        "--kv-cache-dtype=fp8",
                        "--device=cpu");
        // The stock comparison is reported, not enforced, for an FP8 cache.
        assertEquals(0, r.code(), r.all());
        assertTrue(r.out().contains("paged: peak used"), r.out());
        Run bad = run("generate", "--kv-cache-dtype=int4", "--device=cpu");
        assertEquals(2, bad.code());
        assertTrue(
                bad.err().contains("--kv-cache-dtype: kv cache dtype: expected auto, fp8,"
                        + " fp8_e4m3 or fp8_e5m2, got int4"),
                bad.err());
    }

    @Test
    void embedReportsNeighboursParityAndThroughput() throws IOException {
        Path file = tmp.resolve("sentences.txt");
        Files.writeString(
                file,
                "A cat sleeps on the sofa.\n\nThe stock market fell sharply.\nA kitten naps in the sun.\n");
        Run r =
                run(
                        "embed",
                        "--sentences=" + file,
                        "--query=A sleeping cat",
                        "--top=2",
                        "--batch-size=2",
                        "--seconds=0.05",
                        "--threads=2",
                        "--device=cpu");
        assertEquals(0, r.code(), r.all());
        assertTrue(r.out().contains("Embedded 3 sentences: 3 x 384 floats"), r.out());
        // The two sentences about cats are the query's nearest neighbours, in either order.
        String table =
                r.out().substring(r.out().indexOf("Nearest neighbours"), r.out().indexOf("Parity"));
        assertTrue(table.contains("A cat sleeps on the sofa."), table);
        assertTrue(table.contains("A kitten naps in the sun."), table);
        assertTrue(r.out().contains("| pass   |"), r.out());
        for (String engine : new String[] {"fused DJL", "stock DJL ops", "ONNX Runtime"}) {
            assertTrue(r.out().contains("| " + engine), engine + " missing from:\n" + r.out());
        }
    }

    @Test
    void generateLoadsAHuggingFaceCheckpoint() {
        Path llama = HfFixtures.dir("decoders").resolve("llama");
        Run r =
                run(
                        "generate",
                        "--model=" + llama,
                        "--requests=4",
                        "--max-new-tokens=6",
                        "--max-prompt-length=10",
                        "--prefill=paged",
                        "--device=cpu");
        assertEquals(0, r.code(), r.all());
        assertTrue(r.out().contains("Decoder: llama (LLAMA"), r.out());
        assertTrue(r.out().contains("| identical |"), r.out());
    }

    @Test
    void badOptionsExitNonZeroWithAMessage() {
        Run unknown = run("--no-such-option");
        assertEquals(2, unknown.code());
        assertTrue(unknown.err().contains("Unknown option: '--no-such-option'"), unknown.err());

        Run zero = run("generate", "--requests=0");
        assertEquals(2, zero.code());
        assertTrue(zero.err().contains("--requests: expected >= 1, got 0"), zero.err());

        Run device = run("generate", "--device=tpu");
        assertEquals(2, device.code());
        assertTrue(device.err().contains("--device: expected cpu, gpu or gpu:N, got 'tpu'"), device.err());

        Run dtype = run("embed", "--dtype=int8");
        assertEquals(2, dtype.code());
        assertTrue(dtype.err().contains("--dtype: expected float32 or float16, got 'int8'"), dtype.err());

        Run notANumber = run("generate", "--batch-size=many");
        assertEquals(2, notANumber.code());
        assertTrue(notANumber.err().contains("--batch-size"), notANumber.err());
    }

    @Test
    void missingModelIsAnErrorNamingThePath() {
        Path absent = tmp.resolve("absent");
        Run r = run("generate", "--model=" + absent, "--device=cpu");
        assertEquals(2, r.code());
        assertTrue(r.err().contains(absent.toString()), r.err());
    }

    @Test
    void sentencesFileThatIsNotUtf8IsRefused() throws IOException {
        Path file = tmp.resolve("latin1.txt");
        // "café" in ISO-8859-1: 0xE9 alone is not UTF-8.
        Files.write(file, new byte[] {'c', 'a', 'f', (byte) 0xE9, '\n'});
        Run r = run("embed", "--sentences=" + file, "--device=cpu");
        assertEquals(2, r.code());
        assertTrue(r.err().contains(file + ": not valid UTF-8"), r.err());

        Path blank = tmp.resolve("blank.txt");
        Files.writeString(blank, "\n  \n");
        Run b = run("embed", "--sentences=" + blank, "--device=cpu");
        assertEquals(2, b.code());
        assertTrue(b.err().contains("no sentences"), b.err());
    }
}
