//! Cluster routing for the load generator: the key slot, MOVED/ASK and CLUSTER SLOTS come from
//! `kvik_resp::cluster` (shared with kvik-server and kvik-client); this module only turns their
//! "host:port" strings into socket addresses, where an empty host means the node that answered.

use std::net::{IpAddr, SocketAddr};

use kvik_resp::Frame;

pub use kvik_resp::cluster::{key_slot, SLOTS};

/// A redirect with its target resolved to an address.
#[derive(Debug, PartialEq, Eq)]
pub struct Redirect {
    pub ask: bool,
    pub slot: u16,
    pub addr: SocketAddr,
}

/// "host:port" to an address; an empty (or `?`) host is `default_ip`.
fn resolve(addr: &str, default_ip: IpAddr) -> Option<SocketAddr> {
    let (host, port) = addr.rsplit_once(':')?;
    let ip: IpAddr = if host.is_empty() || host == "?" {
        default_ip
    } else {
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .ok()?
    };
    Some(SocketAddr::new(ip, port.parse().ok()?))
}

/// Parses the text of an error reply (without the leading `-`) as a redirect; an empty host
/// means the node that sent it (`default_ip`).
pub fn parse_redirect(err: &[u8], default_ip: IpAddr) -> Option<Redirect> {
    let r = kvik_resp::cluster::parse_redirect(std::str::from_utf8(err).ok()?)?;
    Some(Redirect {
        ask: r.ask,
        slot: r.slot,
        addr: resolve(&r.addr, default_ip)?,
    })
}

/// Master ranges from a CLUSTER SLOTS reply: (first, last, address). A node announced with an
/// empty or `?` host is reached at `default_ip`.
pub fn parse_cluster_slots(
    reply: &Frame,
    default_ip: IpAddr,
) -> Result<Vec<(u16, u16, SocketAddr)>, String> {
    kvik_resp::cluster::parse_cluster_slots(reply, "")?
        .into_iter()
        .map(|(a, b, addr)| {
            resolve(&addr, default_ip)
                .map(|sa| (a, b, sa))
                .ok_or_else(|| format!("CLUSTER SLOTS: '{addr}' is not an IP address and port"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_resolve_empty_hosts_to_the_sender() {
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
