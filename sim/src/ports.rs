//! Port allocation away from the OS ephemeral range (32768+ on Linux), so a port we pick is not
//! handed to some unrelated outgoing connection.
//!
//! Under cargo-nextest every test is a process of its own, several at once, so a per-process
//! counter alone would let two tests walk the same ports. Nextest numbers the tests running at one
//! moment (`NEXTEST_TEST_GLOBAL_SLOT`, unique among them); each slot gets a slice of the range of
//! its own, and the counter walks only that slice. Without a slot (plain `cargo test`, the `sim`
//! binary) the whole range is walked from an offset seeded per process. Collisions with unrelated
//! processes are still possible; topologies retry with fresh ports when a server reports its
//! address in use.
//!
//! A port is free when a socket binds it without `SO_REUSEADDR` ([`bindable`]): the strictest
//! binder here. std's `TcpListener::bind` sets that option, which lets it bind a port whose
//! connections of a moment ago linger in TIME_WAIT (60 s on Linux); a [`RefusingPort`], which
//! binds without it so that nothing else listens there, was then refused the port it was handed
//! (a gate run with a CPU hog beside it: `AddrInUse` on a port another test's server had served
//! on, the ports of one nextest slot being walked by each test that slot runs).
//!
//! [`RefusingPort`]: crate::proxy::RefusingPort

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

const LOW: u32 = 20_000;
const SPAN: u32 = 12_000;
/// The ports of one nextest slot; 12 slots fit the range (more wrap around and share).
const SLICE: u32 = 1_000;
/// The environment variable nextest numbers the running tests by.
const SLOT_ENV: &str = "NEXTEST_TEST_GLOBAL_SLOT";

static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);

/// The part of the range this process walks: `(first, length)`.
fn range(slot: Option<u32>) -> (u32, u32) {
    match slot {
        Some(s) => (LOW + (s % (SPAN / SLICE)) * SLICE, SLICE),
        None => (LOW, SPAN),
    }
}

fn slot() -> Option<u32> {
    std::env::var(SLOT_ENV).ok()?.parse().ok()
}

fn seed(len: u32) -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    // Different processes (parallel test binaries) start at different offsets.
    (std::process::id().wrapping_mul(7919) ^ nanos) % len
}

/// A TCP port on 127.0.0.1 that was free a moment ago and is not handed out twice by this process.
pub fn free_port() -> u16 {
    let (first, len) = range(slot());
    let _ = NEXT.compare_exchange(u32::MAX, seed(len), Ordering::SeqCst, Ordering::SeqCst);
    loop {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let port = (first + n % len) as u16;
        if bindable(port) {
            return port;
        }
    }
}

/// Whether a socket binds 127.0.0.1:`port` without `SO_REUSEADDR`: no socket holds it, and no
/// connection of it lingers in TIME_WAIT.
pub fn bindable(port: u16) -> bool {
    let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
        return false;
    };
    socket
        .bind(SocketAddr::from(([127, 0, 0, 1], port)))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn ports_are_distinct_and_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut sorted = ports.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ports.len());
        assert!(ports.iter().all(|p| (20_000..32_000).contains(p)));
        // Under nextest the ports come from this test's slot's slice.
        if let Some(s) = slot() {
            let (first, len) = range(Some(s));
            assert!(
                ports
                    .iter()
                    .all(|p| (first..first + len).contains(&u32::from(*p)))
            );
        }
    }

    /// A port whose connection the server closed first lingers in TIME_WAIT: std's listener
    /// (`SO_REUSEADDR`) binds it again, a socket without the option is refused it, and so is it
    /// not free.
    #[test]
    fn a_port_in_time_wait_is_not_free() {
        use std::io::Read;
        let port = free_port();
        assert!(bindable(port));
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("listen");
        let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let (served, _) = listener.accept().expect("accept");
        drop(served); // the server closes first: its side goes to TIME_WAIT
        let mut buf = [0u8; 1];
        assert_eq!(client.read(&mut buf).expect("EOF"), 0);
        drop(client);
        drop(listener);
        let lingering = std::time::Instant::now();
        while bindable(port) && lingering.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::yield_now();
        }
        assert!(!bindable(port), "a port in TIME_WAIT reads as free");
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
            "std's listener binds it regardless (SO_REUSEADDR)"
        );
        let mut refusing = crate::proxy::RefusingPort::new(port);
        assert!(refusing.bind().is_err(), "what the flaky test met");
    }

    #[rstest]
    #[case::no_slot(None, (20_000, 12_000))]
    #[case::first_slot(Some(0), (20_000, 1_000))]
    #[case::second_slot(Some(1), (21_000, 1_000))]
    #[case::last_slot(Some(11), (31_000, 1_000))]
    #[case::wraps_past_twelve(Some(12), (20_000, 1_000))]
    fn each_slot_walks_a_slice_of_its_own(#[case] slot: Option<u32>, #[case] want: (u32, u32)) {
        assert_eq!(range(slot), want);
        let (first, len) = range(slot);
        assert!(first + len <= 32_000, "below the ephemeral range");
    }
}
