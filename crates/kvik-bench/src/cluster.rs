//! Cluster routing: Redis Cluster's key slot (CRC16-XMODEM of the key or of its `{hash tag}`,
//! modulo 16384), the slot map read from CLUSTER SLOTS, and MOVED/ASK redirect parsing.

use std::net::{IpAddr, SocketAddr};

use kvik_resp::Frame;

/// Number of hash slots in a Redis cluster.
pub const SLOTS: usize = 16384;

/// CRC16 with polynomial 0x1021, initial value 0 (XMODEM), as Redis Cluster uses.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of `key`: only the part between the first `{` and the next `}` counts when that
/// part is not empty.
pub fn key_slot(key: &[u8]) -> u16 {
    let part = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(part) % SLOTS as u16
}

/// Master ranges from a CLUSTER SLOTS reply: (first, last, address). A node announced with an
/// empty or `?` host is reached at `default_ip`.
pub fn parse_cluster_slots(
    reply: &Frame,
    default_ip: IpAddr,
) -> Result<Vec<(u16, u16, SocketAddr)>, String> {
    let Frame::Array(ranges) = reply else {
        return Err(format!("CLUSTER SLOTS: unexpected reply {reply:?}"));
    };
    let mut out = Vec::new();
    for r in ranges {
        let Frame::Array(items) = r else {
            return Err("CLUSTER SLOTS: range is not an array".into());
        };
        let (Some(Frame::Integer(a)), Some(Frame::Integer(b)), Some(Frame::Array(node))) =
            (items.first(), items.get(1), items.get(2))
        else {
            return Err("CLUSTER SLOTS: malformed range".into());
        };
        let host = match node.first() {
            Some(Frame::Bulk(h)) => String::from_utf8_lossy(h).into_owned(),
            _ => String::new(),
        };
        let Some(Frame::Integer(port)) = node.get(1) else {
            return Err("CLUSTER SLOTS: node without port".into());
        };
        let ip: IpAddr = if host.is_empty() || host == "?" {
            default_ip
        } else {
            host.parse()
                .map_err(|_| format!("CLUSTER SLOTS: host '{host}' is not an IP address"))?
        };
        out.push((*a as u16, *b as u16, SocketAddr::new(ip, *port as u16)));
    }
    Ok(out)
}

/// A redirect reply: `MOVED slot host:port` or `ASK slot host:port`.
#[derive(Debug, PartialEq, Eq)]
pub struct Redirect {
    pub ask: bool,
    pub slot: u16,
    pub addr: SocketAddr,
}

/// Parses the text of an error reply (without the leading `-`) as a redirect; an empty host
/// means the node that sent it (`default_ip`).
pub fn parse_redirect(err: &[u8], default_ip: IpAddr) -> Option<Redirect> {
    let s = std::str::from_utf8(err).ok()?;
    let mut it = s.split_whitespace();
    let ask = match it.next()? {
        "MOVED" => false,
        "ASK" => true,
        _ => return None,
    };
    let slot: u16 = it.next()?.parse().ok()?;
    let (host, port) = it.next()?.rsplit_once(':')?;
    let ip: IpAddr = if host.is_empty() {
        default_ip
    } else {
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .ok()?
    };
    Some(Redirect {
        ask,
        slot,
        addr: SocketAddr::new(ip, port.parse().ok()?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis_cluster() {
        // Values from CLUSTER KEYSLOT on redis-server 7.0.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(
            key_slot(b"foo{}{bar}"),
            key_slot(b"bar"),
            "empty tag: whole key"
        );
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }

    #[test]
    fn redirects() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(
            parse_redirect(b"MOVED 3999 127.0.0.1:6381", lo),
            Some(Redirect {
                ask: false,
                slot: 3999,
                addr: "127.0.0.1:6381".parse().unwrap()
            })
        );
        let r = parse_redirect(b"ASK 1 :7000", lo).unwrap();
        assert!(r.ask);
        assert_eq!(r.addr, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(parse_redirect(b"ERR unknown command", lo), None);
    }

    #[test]
    fn cluster_slots_reply() {
        let node = |p| Frame::Array(vec![Frame::Bulk(b"127.0.0.1".to_vec()), Frame::Integer(p)]);
        let reply = Frame::Array(vec![
            Frame::Array(vec![Frame::Integer(0), Frame::Integer(8191), node(7001)]),
            Frame::Array(vec![
                Frame::Integer(8192),
                Frame::Integer(16383),
                Frame::Array(vec![Frame::Bulk(b"".to_vec()), Frame::Integer(7002)]),
                node(7003),
            ]),
        ]);
        let lo: IpAddr = "127.0.0.2".parse().unwrap();
        let m = parse_cluster_slots(&reply, lo).unwrap();
        assert_eq!(m[0], (0, 8191, "127.0.0.1:7001".parse().unwrap()));
        assert_eq!(m[1], (8192, 16383, "127.0.0.2:7002".parse().unwrap()));
    }
}
