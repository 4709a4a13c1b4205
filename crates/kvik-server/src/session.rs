//! Per-connection state that commands read and change: selected database, protocol version,
//! authentication. It travels with the connection's run of commands: the I/O thread owns it while
//! it reads, and hands it to the worker that executes the run (the connection reads nothing more
//! until the worker hands it back), so no lock guards it.

use crate::clients::ClientInfo;
use kvik_resp::Proto;
use std::sync::Arc;

#[derive(Debug)]
pub struct Session {
    pub db: u16,
    pub proto: Proto,
    pub authenticated: bool,
    /// Set by QUIT (and protocol errors): send what is queued, then close.
    pub close_after_reply: bool,
    /// The shared, observable side of this client (CLIENT LIST, CLIENT KILL).
    pub client: Arc<ClientInfo>,
}

impl Session {
    pub fn new(client: Arc<ClientInfo>, authenticated: bool) -> Session {
        Session {
            db: 0,
            proto: Proto::Resp2,
            authenticated,
            close_after_reply: false,
            client,
        }
    }

    pub fn id(&self) -> u64 {
        self.client.id
    }
}
