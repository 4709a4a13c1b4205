//! SHA-256 hex digests for ACL passwords: Redis stores and prints a user's passwords as the hex
//! SHA-256 of the password (`#<hex>` rules), so kvik computes the same digest (with `sha2`).
//! Only on the AUTH / SETUSER paths, never per command.

use sha2::{Digest, Sha256};

/// The lowercase hex SHA-256 of `data`.
pub fn hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::hex;

    #[test]
    fn known_digests() {
        assert_eq!(
            hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(b"password"),
            "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
        );
    }
}
