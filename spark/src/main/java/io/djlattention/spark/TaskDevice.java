/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.spark;

import ai.djl.Device;

import org.apache.spark.TaskContext;
import org.apache.spark.resource.ResourceInformation;

import java.util.Locale;

/**
 * The device a task runs its model on: {@code auto} is the GPU Spark gave the task ({@code
 * spark.task.resource.gpu.amount}, read from {@code TaskContext.resources()}), else the CPU;
 * {@code cpu}, {@code gpu} and {@code gpu:N} name one.
 */
final class TaskDevice {

    /** The parameter value that follows the task's resources. */
    static final String AUTO = "auto";

    private TaskDevice() {}

    /**
     * Checks a device parameter on the driver.
     *
     * @param device auto, cpu, gpu or gpu:N
     * @return the value, lower case
     * @throws IllegalArgumentException naming {@code device} if it is none of these
     */
    static String check(String device) {
        String d = device == null ? "" : device.trim().toLowerCase(Locale.ROOT);
        if (d.equals(AUTO) || d.equals("cpu") || d.equals("gpu")) {
            return d;
        }
        if (d.startsWith("gpu:")) {
            try {
                if (Integer.parseInt(d.substring(4)) >= 0) {
                    return d;
                }
            } catch (NumberFormatException e) {
                // falls through to the error below
            }
        }
        throw new IllegalArgumentException(
                "device: expected auto, cpu, gpu or gpu:N, got '" + device + "'");
    }

    /**
     * Resolves a device parameter inside a task (or on the driver, where {@code auto} is the CPU).
     *
     * @param device a value {@link #check} accepted
     * @return the device
     */
    static Device resolve(String device) {
        String d = check(device);
        if (d.equals("cpu")) {
            return Device.cpu();
        }
        if (d.equals("gpu")) {
            return Device.gpu();
        }
        if (d.startsWith("gpu:")) {
            return Device.gpu(Integer.parseInt(d.substring(4)));
        }
        TaskContext task = TaskContext.get();
        return task == null ? Device.cpu() : fromResources(task.resources());
    }

    /**
     * {@code auto}'s rule: the first GPU address among a task's resources, else the CPU.
     *
     * @param resources the task's resources ({@code TaskContext.resources()})
     * @return the device
     */
    static Device fromResources(scala.collection.Map<String, ResourceInformation> resources) {
        scala.Option<ResourceInformation> gpu = resources.get("gpu");
        if (gpu.isDefined() && gpu.get().addresses().length > 0) {
            // The address Spark assigned is the CUDA ordinal on this host (its discovery script
            // lists nvidia-smi's indices).
            return Device.gpu(Integer.parseInt(gpu.get().addresses()[0].trim()));
        }
        return Device.cpu();
    }
}
