package org.opensearch.protobufs;

/**
 * Empty stand-in for the gRPC API's protobuf message (org.opensearch:protobufs, not on Maven
 * Central at the version 3.x needs): the node's injector reflects over the k-NN gRPC converter's
 * method signatures, which name this type. Nothing constructs or reads it without a gRPC transport.
 */
public final class QueryContainer {
    private QueryContainer() {
    }

    /** Named by the converter's getHandledQueryCase signature. */
    public enum QueryContainerCase {
        QUERYCONTAINER_NOT_SET
    }
}
