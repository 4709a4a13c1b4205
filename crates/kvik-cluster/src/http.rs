//! One HTTP POST with a JSON body, blocking, with a timeout: all etcd's JSON gateway needs.
//!
//! `ureq` without its default features (plain HTTP, no TLS): its other dependencies (url,
//! idna, log) are already in the workspace through the `redis` crate, so it adds one small
//! crate. TLS to etcd would mean turning its `tls` feature on.

use std::io::Read;
use std::time::Duration;

/// The largest response accepted: an etcd reply here is a few KiB; this only bounds a
/// misbehaving peer.
const MAX_RESPONSE: u64 = 16 << 20;

/// Posts `body` to `http://addr{path}`; returns (status code, response body). An HTTP error
/// status is a response like any other (etcd explains it in the body); only a failure to
/// reach `addr` or to read its answer is an `Err`.
pub fn post_json(
    addr: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<(u16, String), String> {
    let response = match ureq::post(&format!("http://{addr}{path}"))
        .timeout(timeout)
        .set("Content-Type", "application/json")
        .send_string(body)
    {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => return Err(format!("{addr}: {e}")),
    };
    let status = response.status();
    let mut text = String::new();
    response
        .into_reader()
        .take(MAX_RESPONSE)
        .read_to_string(&mut text)
        .map_err(|e| format!("{addr}: reading the response: {e}"))?;
    Ok((status, text))
}
