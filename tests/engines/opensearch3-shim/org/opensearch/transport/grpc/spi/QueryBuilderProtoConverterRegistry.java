package org.opensearch.transport.grpc.spi;

/** Empty stand-in, see QueryBuilderProtoConverter: the k-NN converter has a field of this type. */
public interface QueryBuilderProtoConverterRegistry {
}
