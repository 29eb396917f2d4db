//! Controller plumbing: conditions, reference grants, events, metrics, leader election.
