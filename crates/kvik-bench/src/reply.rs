//! Finding reply boundaries without building values.
//!
//! The load generator only needs to know where each reply ends and whether it is an error, so
//! this scanner walks the RESP2/RESP3 markers and lengths and allocates nothing. (kvik-resp's
//! `parse_frame` builds a full `Frame`; it is used for the few replies whose content matters:
//! the handshake and CLUSTER SLOTS.)

use memchr::memchr;

/// One complete reply found at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Scanned {
    /// Bytes it occupies.
    pub len: usize,
    /// `-` or `!` error.
    pub error: bool,
}

fn num(line: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad length '{}'", String::from_utf8_lossy(line)))
}

/// Scans one reply at the start of `buf`: `Ok(None)` if incomplete, `Err` on a protocol error.
pub fn scan(buf: &[u8]) -> Result<Option<Scanned>, String> {
    let mut pos = 0usize;
    let mut remaining: u64 = 1;
    let error = matches!(buf.first(), Some(b'-' | b'!'));
    while remaining > 0 {
        let Some(nl) = memchr(b'\n', &buf[pos..]) else {
            return Ok(None);
        };
        if nl < 2 || buf[pos + nl - 1] != b'\r' {
            return Err("reply line without CRLF".into());
        }
        let marker = buf[pos];
        let line = &buf[pos + 1..pos + nl - 1];
        pos += nl + 1;
        remaining -= 1;
        match marker {
            b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'_' => {}
            b'$' | b'=' | b'!' => {
                let len = num(line)?;
                if len >= 0 {
                    pos += len as usize + 2;
                    if pos > buf.len() {
                        return Ok(None);
                    }
                }
            }
            b'*' | b'~' | b'>' => {
                let n = num(line)?;
                if n > 0 {
                    remaining += n as u64;
                }
            }
            b'%' => remaining += 2 * num(line)?.max(0) as u64,
            // An attribute map, then the value it annotates.
            b'|' => remaining += 2 * num(line)?.max(0) as u64 + 1,
            m => return Err(format!("unexpected reply byte 0x{m:02x}")),
        }
    }
    Ok(Some(Scanned { len: pos, error }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(s: &[u8]) -> Scanned {
        let r = scan(s).unwrap().unwrap();
        assert_eq!(r.len, s.len(), "{}", String::from_utf8_lossy(s));
        for cut in 0..s.len() {
            assert_eq!(scan(&s[..cut]).unwrap(), None, "prefix {cut} is incomplete");
        }
        r
    }

    #[test]
    fn every_type() {
        assert!(!whole(b"+OK\r\n").error);
        assert!(whole(b"-ERR unknown command 'HSET'\r\n").error);
        assert!(whole(b"!5\r\nERR x\r\n").error);
        whole(b":12\r\n");
        whole(b"$3\r\nxyz\r\n");
        whole(b"$-1\r\n");
        whole(b"*-1\r\n");
        whole(b"*0\r\n");
        whole(b"*2\r\n$1\r\na\r\n*2\r\n:1\r\n$-1\r\n");
        whole(b"%1\r\n+k\r\n,1.5\r\n");
        whole(b"~2\r\n#t\r\n_\r\n");
        whole(b"|1\r\n+a\r\n+b\r\n:5\r\n");
        whole(b"=7\r\ntxt:abc\r\n");
    }

    #[test]
    fn stops_at_the_first_reply_and_refuses_garbage() {
        let r = scan(b"+OK\r\n:1\r\n").unwrap().unwrap();
        assert_eq!(r.len, 5);
        assert!(scan(b"?x\r\n").is_err());
        assert!(scan(b"$x\r\n").is_err());
        assert!(scan(b"+OK\n").is_err());
    }
}
