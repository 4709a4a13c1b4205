//! Redis Cluster's wire-level rules, shared by the server (keys on disk carry their slot), the
//! client (routing) and the load generator: the key slot (CRC16-XMODEM of the key, or of its
//! `{hash tag}`, modulo 16384), MOVED/ASK redirect errors, and the CLUSTER SLOTS reply.
//! Pure functions over bytes and frames; no I/O.

use crate::Frame;

/// Number of hash slots in a Redis cluster.
pub const SLOTS: usize = 16384;

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis's `crc16.c`.
const fn crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

static CRC16_TABLE: [u16; 256] = crc16_table();

/// CRC16 of `bytes` as Redis computes it for key slots.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[(((crc >> 8) as u8) ^ b) as usize]
    })
}

/// The part of `key` that is hashed: the content of the first `{...}` if it is non-empty,
/// otherwise the whole key (Redis's `keyHashSlot` rule).
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The cluster slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

/// The slot of every key that starts with `prefix`, if the prefix decides it: it holds the
/// first `{` and, after it, a `}` with something between (a whole hash tag). Otherwise a
/// key's later bytes decide, and keys with this prefix are in any slot.
pub fn prefix_slot(prefix: &[u8]) -> Option<u16> {
    let open = prefix.iter().position(|&b| b == b'{')?;
    let len = prefix[open + 1..].iter().position(|&b| b == b'}')?;
    (len > 0).then(|| key_slot(&prefix[..open + len + 2]))
}

/// A `MOVED` or `ASK` error reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// True for `ASK` (this request only), false for `MOVED` (the slot's new owner).
    pub ask: bool,
    /// The slot.
    pub slot: u16,
    /// "host:port" as sent; the host is empty when the node means "my own address".
    pub addr: String,
}

/// Parses the text of an error reply (without the leading `-`), e.g.
/// `MOVED 3999 127.0.0.1:6381`, as a redirect. Anything else is `None`.
pub fn parse_redirect(msg: &str) -> Option<Redirect> {
    let mut it = msg.split_ascii_whitespace();
    let ask = match it.next()? {
        "MOVED" => false,
        "ASK" => true,
        _ => return None,
    };
    let slot: u16 = it.next()?.parse().ok()?;
    let addr = it.next()?.to_string();
    if slot as usize >= SLOTS || !addr.contains(':') {
        return None;
    }
    Some(Redirect { ask, slot, addr })
}

/// The master ranges of a CLUSTER SLOTS reply as (first slot, last slot, "host:port"), sorted.
/// A master announced with an empty or `?` host is reached at `asked_host` (the node that
/// answered). Replica entries after the master are ignored.
pub fn parse_cluster_slots(
    reply: &Frame,
    asked_host: &str,
) -> Result<Vec<(u16, u16, String)>, String> {
    let bad = |why: &str| format!("malformed CLUSTER SLOTS reply ({why}): {reply:?}");
    let Frame::Array(entries) = reply else {
        return Err(bad("not an array"));
    };
    let mut ranges = Vec::with_capacity(entries.len());
    for e in entries {
        let Frame::Array(parts) = e else {
            return Err(bad("range is not an array"));
        };
        let (Some(Frame::Integer(a)), Some(Frame::Integer(b)), Some(Frame::Array(master))) =
            (parts.first(), parts.get(1), parts.get(2))
        else {
            return Err(bad("range without first, last and master"));
        };
        let host = match master.first() {
            Some(Frame::Bulk(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(Frame::Simple(h)) => h.clone(),
            _ => return Err(bad("master without host")),
        };
        let host = if host.is_empty() || host == "?" {
            asked_host.to_string()
        } else {
            host
        };
        let Some(Frame::Integer(port)) = master.get(1) else {
            return Err(bad("master without port"));
        };
        let slots = 0..SLOTS as i64;
        if !slots.contains(a) || !slots.contains(b) || a > b || !(0..=65535).contains(port) {
            return Err(bad("slot or port out of range"));
        }
        ranges.push((*a as u16, *b as u16, format!("{host}:{port}")));
    }
    ranges.sort();
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_decides_the_slot_only_with_a_whole_hash_tag() {
        assert_eq!(
            prefix_slot(b"{user1}:"),
            Some(key_slot(b"{user1}:anything"))
        );
        assert_eq!(prefix_slot(b"a{b}c"), Some(key_slot(b"b")));
        assert_eq!(prefix_slot(b"a{b}{c}"), Some(key_slot(b"b")));
        assert_eq!(prefix_slot(b"{user1"), None); // the `}` may come later, or never
        assert_eq!(prefix_slot(b"{}x"), None); // an empty tag: the whole key is hashed
        assert_eq!(prefix_slot(b"user:"), None);
        assert_eq!(prefix_slot(b"a}{b}"), Some(key_slot(b"b")));
    }

    #[test]
    fn slots_match_redis_cluster_keyslot() {
        // The CRC16/XMODEM check value, and values CLUSTER KEYSLOT gives on Redis 7.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
    }

    #[test]
    fn redirects_parse() {
        assert_eq!(
            parse_redirect("MOVED 3999 127.0.0.1:6381"),
            Some(Redirect {
                ask: false,
                slot: 3999,
                addr: "127.0.0.1:6381".into()
            })
        );
        let r = parse_redirect("ASK 1 :7000").unwrap();
        assert!(r.ask);
        assert_eq!(r.addr, ":7000");
        assert_eq!(parse_redirect("MOVED 16384 127.0.0.1:1"), None);
        assert_eq!(parse_redirect("MOVED 1 nohostport"), None);
        assert_eq!(parse_redirect("ERR unknown command"), None);
    }

    #[test]
    fn cluster_slots_reply_parses_and_fills_empty_hosts() {
        let node = |h: &[u8], p| Frame::Array(vec![Frame::Bulk(h.to_vec()), Frame::Integer(p)]);
        let reply = Frame::Array(vec![
            Frame::Array(vec![
                Frame::Integer(8192),
                Frame::Integer(16383),
                node(b"", 7002),
                node(b"127.0.0.1", 7003),
            ]),
            Frame::Array(vec![
                Frame::Integer(0),
                Frame::Integer(8191),
                node(b"127.0.0.1", 7001),
            ]),
        ]);
        let m = parse_cluster_slots(&reply, "127.0.0.2").unwrap();
        assert_eq!(m[0], (0, 8191, "127.0.0.1:7001".to_string()));
        assert_eq!(m[1], (8192, 16383, "127.0.0.2:7002".to_string()));
        let bad = Frame::Array(vec![Frame::Array(vec![
            Frame::Integer(0),
            Frame::Integer(20000),
            node(b"h", 1),
        ])]);
        assert!(parse_cluster_slots(&bad, "x").is_err());
        assert!(parse_cluster_slots(&Frame::Integer(1), "x").is_err());
    }
}
