import Testing

/// Every suite that uses the cluster (SpoolBench's `PostgresCluster`), one test at a time: some
/// stop and restart it.
@Suite(.serialized) enum PostgresSuites {}
