/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.it.decoder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.ndarray.NDManager;
import ai.djl.ndarray.index.NDIndex;
import ai.djl.ndarray.types.DataType;
import ai.djl.ndarray.types.Shape;

import io.djlattention.it.HfFixtures;
import io.djlattention.it.TestDevice;
import io.djlattention.zoo.hf.SafetensorsFile;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Every conversion a checkpoint load makes (F32, F16, BF16 to float32 and float16) gives exactly
 * torch's {@code tensor.to(dtype)} (make_checkpoint_load.py's expected.safetensors): on every
 * float16 and bfloat16 bit pattern, and on float32 values at and beside every float16 rounding
 * boundary plus a million log-uniform ones. NaN must stay NaN (its payload may differ: libtorch's
 * vectorised CPU path keeps it, its scalar path does not). Read into a fresh array and into a row
 * range of a larger one, whose other rows must stay untouched.
 */
class SafetensorsConversionTest {

    @ParameterizedTest
    @CsvSource({
        "f32, float16, f32_as_f16",
        "f32, float32, f32_as_f32",
        "f16, float32, f16_as_f32",
        "f16, float16, f16_as_f16",
        "bf16, float32, bf16_as_f32",
        "bf16, float16, bf16_as_f16"
    })
    void conversionsAreTorchs(String source, String dtype, String expectedName) throws IOException {
        Path dir = HfFixtures.dir("checkpoint_load");
        DataType type = "float16".equals(dtype) ? DataType.FLOAT16 : DataType.FLOAT32;
        try (NDManager manager = NDManager.newBaseManager(TestDevice.get());
                SafetensorsFile in = SafetensorsFile.open(dir.resolve("source.safetensors"));
                SafetensorsFile ref = SafetensorsFile.open(dir.resolve("expected.safetensors"))) {
            NDArray expected = ref.read(expectedName, manager, type);
            NDArray got = in.read(source, manager, type);
            assertEquals(type, got.getDataType());
            assertEquals(in.getEntries().get(source).getShape(), got.getShape());
            assertSameValues(expected, got, source + " as " + dtype);

            // Into rows 1..n of an [n + 2] array: the first and last elements keep their value.
            long n = got.size();
            NDArray wide = manager.full(new Shape(n + 2), 7f, type);
            NDArray rows = wide.get(new NDIndex("1:{}", n + 1));
            in.readInto(source, rows);
            assertSameValues(expected, rows, source + " as " + dtype + " into a row range");
            float[] ends =
                    wide.get(new NDIndex("0:{}:{}", n + 2, n + 1))
                            .toType(DataType.FLOAT32, false)
                            .toFloatArray();
            assertEquals(7f, ends[0]);
            assertEquals(7f, ends[1]);
        }
    }

    @ParameterizedTest
    @CsvSource({"bf16, int32", "f32, float64", "f16, int64"})
    void unconvertibleTypesAreRefusedNamingTheTensor(String source, String dtype)
            throws IOException {
        Path dir = HfFixtures.dir("checkpoint_load");
        DataType type = DataType.valueOf(dtype.toUpperCase(Locale.ROOT));
        try (NDManager manager = NDManager.newBaseManager(Device.cpu());
                SafetensorsFile in = SafetensorsFile.open(dir.resolve("source.safetensors"))) {
            IOException e = assertThrows(IOException.class, () -> in.read(source, manager, type));
            assertTrue(e.getMessage().contains("tensor " + source), e.getMessage());
            IllegalArgumentException wrongSize =
                    assertThrows(
                            IllegalArgumentException.class,
                            () -> in.readInto(source, manager.zeros(new Shape(5))));
            assertTrue(wrongSize.getMessage().startsWith("destination:"), wrongSize.getMessage());
        }
    }

    /** Bit-equal, except that a NaN only has to be a NaN. */
    private static void assertSameValues(NDArray expected, NDArray got, String what) {
        assertEquals(expected.size(), got.size(), what);
        ByteBuffer e = host(expected);
        ByteBuffer g = host(got);
        boolean half = got.getDataType() == DataType.FLOAT16;
        int n = Math.toIntExact(got.size());
        for (int i = 0; i < n; ++i) {
            int want = half ? e.getShort(2 * i) & 0xffff : e.getInt(4 * i);
            int have = half ? g.getShort(2 * i) & 0xffff : g.getInt(4 * i);
            if (want != have && !(isNaN(want, half) && isNaN(have, half))) {
                fail(
                        String.format(
                                "%s: element %d: expected bits %08x, got %08x",
                                what, i, want, have));
            }
        }
    }

    private static boolean isNaN(int bits, boolean half) {
        return half
                ? (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0
                : Float.isNaN(Float.intBitsToFloat(bits));
    }

    private static ByteBuffer host(NDArray a) {
        return a.toDevice(Device.cpu(), false).toByteBuffer().order(ByteOrder.nativeOrder());
    }
}
