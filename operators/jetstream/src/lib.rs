//! The JetStream controller: streams, consumers, buckets, balancing, evacuation.
