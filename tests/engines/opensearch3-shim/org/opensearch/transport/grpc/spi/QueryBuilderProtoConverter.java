package org.opensearch.transport.grpc.spi;

/**
 * Empty stand-in for the transport-grpc module's SPI type, which is not published on Maven Central.
 * The OpenSearch 3.x k-NN plugin instantiates its gRPC query converter in createComponents, so the
 * JVM must be able to load this interface; with no gRPC transport on the node the converter is
 * never called. Compiled by tests/engines/engines.py for 3.x nodes only.
 */
public interface QueryBuilderProtoConverter {
}
