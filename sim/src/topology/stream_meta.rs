//! A replica's stream metadata made readable by a standalone server: nats-server refuses to
//! recover a stream whose `meta.inf` asks for more than one replica when it is not clustered
//! ("replicas > 1 not supported in non-clustered mode"), and refuses any `meta.inf` whose
//! `meta.sum` does not match (jetstream.go, the account's stream recovery). The copy's
//! `meta.inf` is rewritten to one replica and no placement, and its `meta.sum` recomputed as the
//! server computes it: HighwayHash-64 of the file keyed with SHA-256 of the stream's directory
//! name, hex of the little-endian digest.
//!
//! HighwayHash-64 here follows the portable reference implementation (google/highwayhash,
//! `c/highwayhash.c`); it is tested against the reference's published vectors and, live, by
//! nats-server accepting the sums it writes.

use std::path::Path;

use sha2::Digest;

const META: &str = "meta.inf";
const META_SUM: &str = "meta.sum";

/// Rewrites every stream's metadata under `store` (a copy of a server's store directory,
/// `jetstream/<account>/streams/<stream>/`) to one replica and no placement, with a matching
/// checksum. Returns how many streams it rewrote.
pub(super) fn make_single_replica(store: &Path) -> std::io::Result<usize> {
    let mut done = 0;
    let js = store.join("jetstream");
    let Ok(accounts) = std::fs::read_dir(&js) else {
        return Ok(0);
    };
    for account in accounts {
        let streams = account?.path().join("streams");
        let Ok(streams) = std::fs::read_dir(&streams) else {
            continue;
        };
        for stream in streams {
            let dir = stream?.path();
            let meta = dir.join(META);
            let Ok(text) = std::fs::read(&meta) else {
                continue;
            };
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let single = single_replica(&text).map_err(std::io::Error::other)?;
            std::fs::write(&meta, &single)?;
            std::fs::write(dir.join(META_SUM), meta_sum(&name, &single))?;
            done += 1;
        }
    }
    Ok(done)
}

/// The `meta.inf` JSON with `num_replicas` 1 and no `placement`.
fn single_replica(meta: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    let mut v: serde_json::Value = serde_json::from_slice(meta)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("num_replicas".into(), 1.into());
        o.remove("placement");
    }
    serde_json::to_vec(&v)
}

/// `meta.sum` of stream directory `name` holding `meta`.
pub(super) fn meta_sum(name: &str, meta: &[u8]) -> String {
    let key: [u8; 32] = sha2::Sha256::digest(name.as_bytes()).into();
    hex::encode(highway64(&key, meta).to_le_bytes())
}

/// HighwayHash-64 of `data` under `key` (the reference's portable form).
pub(super) fn highway64(key: &[u8; 32], data: &[u8]) -> u64 {
    let mut s = State::new(key);
    let mut chunks = data.chunks_exact(32);
    for packet in &mut chunks {
        s.update_packet(packet);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        s.update_remainder(rest);
    }
    s.finalize64()
}

struct State {
    v0: [u64; 4],
    v1: [u64; 4],
    mul0: [u64; 4],
    mul1: [u64; 4],
}

fn lane(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i * 8..i * 8 + 8]);
    u64::from_le_bytes(w)
}

impl State {
    fn new(key: &[u8; 32]) -> State {
        let mul0 = [
            0xdbe6d5d5fe4cce2f,
            0xa4093822299f31d0,
            0x13198a2e03707344,
            0x243f6a8885a308d3,
        ];
        let mul1 = [
            0x3bd39e10cb0ef593,
            0xc0acf169b5f18a8c,
            0xbe5466cf34e90c6c,
            0x452821e638d01377,
        ];
        let mut v0 = [0; 4];
        let mut v1 = [0; 4];
        for i in 0..4 {
            let k = lane(key, i);
            v0[i] = mul0[i] ^ k;
            v1[i] = mul1[i] ^ k.rotate_left(32);
        }
        State { v0, v1, mul0, mul1 }
    }

    fn update(&mut self, lanes: [u64; 4]) {
        for (i, l) in lanes.iter().enumerate() {
            self.v1[i] = self.v1[i].wrapping_add(self.mul0[i].wrapping_add(*l));
            self.mul0[i] ^= (self.v1[i] & 0xffff_ffff).wrapping_mul(self.v0[i] >> 32);
            self.v0[i] = self.v0[i].wrapping_add(self.mul1[i]);
            self.mul1[i] ^= (self.v0[i] & 0xffff_ffff).wrapping_mul(self.v1[i] >> 32);
        }
        let (v0, v1) = (&mut self.v0, &mut self.v1);
        let (a1, a0) = zipper_merge(v1[1], v1[0]);
        v0[1] = v0[1].wrapping_add(a1);
        v0[0] = v0[0].wrapping_add(a0);
        let (a3, a2) = zipper_merge(v1[3], v1[2]);
        v0[3] = v0[3].wrapping_add(a3);
        v0[2] = v0[2].wrapping_add(a2);
        let (b1, b0) = zipper_merge(v0[1], v0[0]);
        v1[1] = v1[1].wrapping_add(b1);
        v1[0] = v1[0].wrapping_add(b0);
        let (b3, b2) = zipper_merge(v0[3], v0[2]);
        v1[3] = v1[3].wrapping_add(b3);
        v1[2] = v1[2].wrapping_add(b2);
    }

    fn update_packet(&mut self, packet: &[u8]) {
        self.update([
            lane(packet, 0),
            lane(packet, 1),
            lane(packet, 2),
            lane(packet, 3),
        ]);
    }

    fn update_remainder(&mut self, bytes: &[u8]) {
        let size = bytes.len();
        let size_mod4 = size & 3;
        let whole = size & !3;
        let remainder = &bytes[whole..];
        for v in &mut self.v0 {
            *v = v.wrapping_add(((size as u64) << 32).wrapping_add(size as u64));
        }
        for v in &mut self.v1 {
            let lo = (*v as u32).rotate_left(size as u32);
            let hi = ((*v >> 32) as u32).rotate_left(size as u32);
            *v = u64::from(lo) | (u64::from(hi) << 32);
        }
        let mut packet = [0u8; 32];
        packet[..whole].copy_from_slice(&bytes[..whole]);
        if size & 16 != 0 {
            for i in 0..4 {
                packet[28 + i] = bytes[whole + i + size_mod4 - 4];
            }
        } else if size_mod4 != 0 {
            packet[16] = remainder[0];
            packet[17] = remainder[size_mod4 >> 1];
            packet[18] = remainder[size_mod4 - 1];
        }
        self.update_packet(&packet);
    }

    fn finalize64(mut self) -> u64 {
        for _ in 0..4 {
            let v = self.v0;
            self.update([
                v[2].rotate_left(32),
                v[3].rotate_left(32),
                v[0].rotate_left(32),
                v[1].rotate_left(32),
            ]);
        }
        self.v0[0]
            .wrapping_add(self.v1[0])
            .wrapping_add(self.mul0[0])
            .wrapping_add(self.mul1[0])
    }
}

/// The reference's ZipperMergeAndAdd: what to add to (add1, add0) from (v1, v0).
fn zipper_merge(v1: u64, v0: u64) -> (u64, u64) {
    let add0 = (((v0 & 0xff00_0000) | (v1 & 0xff_0000_0000)) >> 24)
        | (((v0 & 0xff00_0000_0000) | (v1 & 0xff_0000_0000_0000)) >> 16)
        | (v0 & 0xff_0000)
        | ((v0 & 0xff00) << 32)
        | ((v1 & 0xff00_0000_0000_0000) >> 8)
        | (v0 << 56);
    let add1 = (((v1 & 0xff00_0000) | (v0 & 0xff_0000_0000)) >> 24)
        | (v1 & 0xff_0000)
        | ((v1 & 0xff00_0000_0000) >> 16)
        | ((v1 & 0xff00) << 24)
        | ((v0 & 0xff_0000_0000_0000) >> 8)
        | ((v1 & 0xff) << 48)
        | (v0 & 0xff00_0000_0000_0000);
    (add1, add0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// The reference's test key: bytes 0..32.
    fn reference_key() -> [u8; 32] {
        std::array::from_fn(|i| i as u8)
    }

    /// The reference's vectors (highwayhash_test.cc, kExpected64): the hash of bytes 0..len.
    #[rstest]
    #[case::empty(0, 0x907A56DE22C26E53)]
    #[case::one_byte(1, 0x7EAB43AAC7CDDD78)]
    #[case::two_bytes(2, 0xB8D0569AB0B53D62)]
    fn highway64_matches_the_reference_vectors(#[case] len: usize, #[case] want: u64) {
        let data: Vec<u8> = (0..len as u8).collect();
        assert_eq!(highway64(&reference_key(), &data), want, "len {len}");
    }

    #[test]
    fn a_rewritten_meta_asks_for_one_replica_and_no_placement() {
        let meta = br#"{"name":"S","num_replicas":3,"placement":{"cluster":"c1"},"created":"x"}"#;
        let v: serde_json::Value =
            serde_json::from_slice(&single_replica(meta).expect("json")).expect("json");
        assert_eq!(v["num_replicas"], 1);
        assert!(v.get("placement").is_none());
        assert_eq!(v["name"], "S");
    }
}
