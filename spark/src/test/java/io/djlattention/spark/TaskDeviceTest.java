/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import ai.djl.Device;

import org.apache.spark.resource.ResourceInformation;
import org.junit.jupiter.api.Test;

import scala.collection.Map;
import scala.jdk.javaapi.CollectionConverters;

import java.util.HashMap;

/**
 * {@code device=auto} follows the task's GPU resource (what {@code spark.task.resource.gpu.amount}
 * and the worker's discovery script give a task), without a GPU or a cluster: the resources a
 * task would see are made here.
 */
class TaskDeviceTest {

    private static Map<String, ResourceInformation> resources(String name, String... addresses) {
        java.util.Map<String, ResourceInformation> map = new HashMap<>();
        if (name != null) {
            map.put(name, new ResourceInformation(name, addresses));
        }
        return CollectionConverters.asScala(map);
    }

    @Test
    void theTasksGpuAddressIsTheDevice() {
        assertEquals(Device.gpu(3), TaskDevice.fromResources(resources("gpu", "3", "5")));
        assertEquals(Device.gpu(0), TaskDevice.fromResources(resources("gpu", " 0 ")));
    }

    @Test
    void withoutAGpuResourceTheTaskRunsOnTheCpu() {
        assertEquals(Device.cpu(), TaskDevice.fromResources(resources(null)));
        assertEquals(Device.cpu(), TaskDevice.fromResources(resources("gpu")));
        assertEquals(Device.cpu(), TaskDevice.fromResources(resources("fpga", "0")));
    }

    @Test
    void outsideATaskAutoIsTheCpuAndNamedDevicesAreKept() {
        assertEquals(Device.cpu(), TaskDevice.resolve("auto"));
        assertEquals(Device.gpu(2), TaskDevice.resolve("GPU:2"));
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> TaskDevice.check("tpu"));
        assertEquals("device: expected auto, cpu, gpu or gpu:N, got 'tpu'", e.getMessage());
    }
}
