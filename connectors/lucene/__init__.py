"""Elasticsearch and OpenSearch: one Lucene query builder, client and hit reader."""
