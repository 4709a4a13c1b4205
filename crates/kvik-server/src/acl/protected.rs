//! Protected mode, as Redis: while `protected-mode` is on and the default user has no password,
//! only loopback clients may connect; any other gets Redis's DENIED message and is closed.

use std::net::IpAddr;

/// The line a refused client reads before the server closes the connection (Redis 7.0's
/// text, typo included).
pub const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Whether a client from `peer` is refused.
pub fn refuses(protected_mode: bool, default_user_has_password: bool, peer: IpAddr) -> bool {
    protected_mode && !default_user_has_password && !is_loopback(peer)
}

fn is_loopback(peer: IpAddr) -> bool {
    match peer {
        IpAddr::V4(a) => a.is_loopback(),
        IpAddr::V6(a) => a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// The DENIED message for a new client from `peer`, if protected mode refuses it.
pub fn check(config: &crate::config::Config, peer: IpAddr) -> Option<&'static [u8]> {
    let on = crate::config::redis_params_value(config, "protected-mode").as_deref() == Some("yes");
    let has_password = !config.acl.default_nopass();
    refuses(on, has_password, peer).then_some(DENIED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_only_remote_clients_without_password_in_protected_mode() {
        let remote: IpAddr = "10.1.2.3".parse().unwrap();
        let remote6: IpAddr = "2001:db8::1".parse().unwrap();
        for local in ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1"] {
            assert!(!refuses(true, false, local.parse().unwrap()), "{local}");
        }
        assert!(refuses(true, false, remote));
        assert!(refuses(true, false, remote6));
        assert!(!refuses(false, false, remote));
        assert!(!refuses(true, true, remote));
        assert!(DENIED.starts_with(b"-DENIED ") && DENIED.ends_with(b"\r\n"));
    }
}
