//! Every CRD type of the four API groups, their CEL rules and condition vocabulary.
