//! The replication link's wire format after the PSYNC reply line: binary frames, each a tag
//! byte, a payload length (u32, little-endian) and the payload. One codec for both sides.
//!
//! Primary to replica: [`BATCH`] (sequence number u64 LE, then the raw WriteBatch),
//! [`SYNC_START`] (a full sync's transfer: the checkpoint's total bytes u64 LE, the bytes the
//! replica already holds and will not be sent u64 LE, then the checkpoint's id),
//! [`FILE`] (a checkpoint file: size u64 LE, the offset its first chunk starts at u64 LE, then
//! its name), [`CHUNK`] (the next bytes of that file), [`CHECKPOINT_END`] (the checkpoint's
//! sequence number), [`PING`] (the primary's lease clock, u64 LE: while idle, and with the
//! write lease on at least every quarter lease).
//! Replica to primary: [`ACK`] (the offset applied, u64 LE; then, once a PING arrived, the
//! newest PING stamp u64 LE and the replica's cluster node id, for `lease`).

use std::io::{self, Read, Write};

pub const BATCH: u8 = b'B';
pub const SYNC_START: u8 = b'S';
pub const FILE: u8 = b'F';
pub const CHUNK: u8 = b'C';
pub const CHECKPOINT_END: u8 = b'E';
pub const PING: u8 = b'P';
pub const ACK: u8 = b'A';

/// Largest payload accepted: a frame claiming more is a broken link, not an allocation.
pub const MAX_FRAME: usize = 1 << 31;
/// Bytes of a checkpoint file per CHUNK frame.
pub const CHUNK_SIZE: usize = 256 * 1024;

/// Writes one frame whose payload is the concatenation of `parts`.
pub fn write_frame(w: &mut impl Write, tag: u8, parts: &[&[u8]]) -> io::Result<()> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "frame too large",
        ));
    }
    w.write_all(&[tag])?;
    w.write_all(&(len as u32).to_le_bytes())?;
    for p in parts {
        w.write_all(p)?;
    }
    Ok(())
}

/// Reads one frame into `payload` (reused), returning its tag.
pub fn read_frame(r: &mut impl Read, payload: &mut Vec<u8>) -> io::Result<u8> {
    let mut head = [0u8; 5];
    r.read_exact(&mut head)?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    payload.clear();
    payload.resize(len, 0);
    r.read_exact(payload)?;
    Ok(head[0])
}

/// An ACK's payload: the offset, and the echoed lease stamp with the node id when there is one.
pub fn ack_payload(offset: u64, echo: Option<(u64, &str)>) -> Vec<u8> {
    let mut p = offset.to_le_bytes().to_vec();
    if let Some((stamp, node_id)) = echo {
        p.extend_from_slice(&stamp.to_le_bytes());
        p.extend_from_slice(node_id.as_bytes());
    }
    p
}

/// The echoed lease stamp and node id of an ACK's payload, if it carries them.
pub fn ack_echo(payload: &[u8]) -> Option<(u64, &str)> {
    let stamp = u64_at(payload.get(8..)?).ok()?;
    let node_id = std::str::from_utf8(payload.get(16..)?).ok()?;
    Some((stamp, node_id))
}

/// The u64 at the start of a payload (sequence numbers, offsets, sizes).
pub fn u64_at(payload: &[u8]) -> io::Result<u64> {
    payload
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short frame"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, BATCH, &[&7u64.to_le_bytes(), b"data"]).unwrap();
        write_frame(&mut buf, PING, &[]).unwrap();
        let mut r = buf.as_slice();
        let mut p = Vec::new();
        assert_eq!(read_frame(&mut r, &mut p).unwrap(), BATCH);
        assert_eq!(u64_at(&p).unwrap(), 7);
        assert_eq!(&p[8..], b"data");
        assert_eq!(read_frame(&mut r, &mut p).unwrap(), PING);
        assert!(p.is_empty());
        assert!(read_frame(&mut r, &mut p).is_err());
    }

    #[test]
    fn acks_carry_the_echoed_stamp_only_when_there_is_one() {
        let plain = ack_payload(5, None);
        assert_eq!(u64_at(&plain).unwrap(), 5);
        assert_eq!(ack_echo(&plain), None);
        let echoed = ack_payload(6, Some((1234, "node-a")));
        assert_eq!(u64_at(&echoed).unwrap(), 6);
        assert_eq!(ack_echo(&echoed), Some((1234, "node-a")));
    }
}
