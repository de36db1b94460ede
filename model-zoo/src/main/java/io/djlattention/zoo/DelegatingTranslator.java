/*
 * Copyright 2026 djl-attention contributors. Licensed under the Apache License, Version 2.0.
 */
package io.djlattention.zoo;

import ai.djl.inference.Predictor;
import ai.djl.ndarray.NDList;
import ai.djl.ndarray.NDManager;
import ai.djl.repository.zoo.ZooModel;
import ai.djl.translate.Batchifier;
import ai.djl.translate.TranslatorContext;
import ai.djl.translate.Translator;

import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Predicts with a delegate {@link ZooModel} on behalf of the model DJL's loader built. DJL's
 * predictor hands a batch to {@link #batchProcessInput}, which keeps the inputs and returns an
 * empty {@link NDList} (DJL does not run a block on it); {@link #batchProcessOutput} then runs the
 * whole batch through the delegate's own predictor, so {@code batchPredict} stays one batched call.
 *
 * <p>Each DJL predictor gets its own delegate predictor, closed with it.
 *
 * @param <I> the input type
 * @param <O> the output type
 */
public final class DelegatingTranslator<I, O> implements Translator<I, O> {

    private static final String INPUTS = "djl-attention.inputs";

    private final ZooModel<I, O> delegate;
    private final Map<NDManager, Predictor<I, O>> predictors = new ConcurrentHashMap<>();

    /**
     * Creates a translator predicting with a model.
     *
     * @param delegate the model
     */
    public DelegatingTranslator(ZooModel<I, O> delegate) {
        this.delegate = delegate;
    }

    /**
     * Returns the model this translator predicts with (for its own APIs, e.g. a decoder's
     * streaming requests).
     *
     * @return the model
     */
    public ZooModel<I, O> getDelegate() {
        return delegate;
    }

    /**
     * Returns a batchifier, so that DJL's predictor takes the batch route ({@link
     * #batchProcessInput}); it is never called.
     *
     * @return {@link Batchifier#STACK}
     */
    @Override
    public Batchifier getBatchifier() {
        return Batchifier.STACK;
    }

    /** {@inheritDoc} */
    @Override
    public NDList batchProcessInput(TranslatorContext ctx, List<I> inputs) {
        ctx.setAttachment(INPUTS, inputs);
        return new NDList();
    }

    /** {@inheritDoc} */
    @Override
    @SuppressWarnings("unchecked")
    public List<O> batchProcessOutput(TranslatorContext ctx, NDList list) throws Exception {
        List<I> inputs = (List<I>) ctx.getAttachment(INPUTS);
        return predictor(ctx.getPredictorManager()).batchPredict(inputs);
    }

    /**
     * Not used: inputs go through {@link #batchProcessInput}.
     *
     * @param ctx the context
     * @param input the input
     * @return never
     */
    @Override
    public NDList processInput(TranslatorContext ctx, I input) {
        throw new UnsupportedOperationException("DelegatingTranslator handles whole batches");
    }

    /**
     * Not used: outputs come from {@link #batchProcessOutput}.
     *
     * @param ctx the context
     * @param list the output
     * @return never
     */
    @Override
    public O processOutput(TranslatorContext ctx, NDList list) {
        throw new UnsupportedOperationException("DelegatingTranslator handles whole batches");
    }

    private Predictor<I, O> predictor(NDManager owner) {
        return predictors.computeIfAbsent(
                owner,
                m -> {
                    Predictor<I, O> p = delegate.newPredictor();
                    // Closed, and forgotten, when the DJL predictor that owns the manager closes.
                    m.attachInternal(
                            "djl-attention-predictor-" + UUID.randomUUID(),
                            () -> {
                                predictors.remove(m);
                                p.close();
                            });
                    return p;
                });
    }
}
