//! Port allocation away from the OS ephemeral range (32768+ on Linux), so a port we pick is not
//! handed to some unrelated outgoing connection. Collisions with other processes are still possible;
//! topologies retry with fresh ports when a server reports its address in use.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

const LOW: u32 = 20_000;
const SPAN: u32 = 12_000;

static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);

fn seed() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    // Different processes (parallel test binaries) start at different offsets.
    (std::process::id().wrapping_mul(7919) ^ nanos) % SPAN
}

/// A TCP port on 127.0.0.1 that was free a moment ago and is not handed out twice by this process.
pub fn free_port() -> u16 {
    let _ = NEXT.compare_exchange(u32::MAX, seed(), Ordering::SeqCst, Ordering::SeqCst);
    loop {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let port = (LOW + n % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_and_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut sorted = ports.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ports.len());
        assert!(ports.iter().all(|p| (20_000..32_000).contains(p)));
    }
}
