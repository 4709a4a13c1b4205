//! The fields of a small hash as the hot cache holds them: field/value pairs sorted by field
//! (storage order), packed in one buffer. A hit shares the set; a write that changes a cached
//! hash builds the next set with one pass over the old one ([`FieldSet::edited`]), a copy of
//! its bytes, rather than a reference-count update per field and value.

use std::collections::BTreeMap;

/// Field/value pairs sorted by field, in one buffer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    bytes: Vec<u8>,
    /// Per pair: where its field starts in `bytes`, the field's length and the value's length
    /// (the value follows the field).
    index: Vec<(usize, usize, usize)>,
}

impl FieldSet {
    pub fn with_capacity(pairs: usize) -> FieldSet {
        FieldSet {
            bytes: Vec::new(),
            index: Vec::with_capacity(pairs),
        }
    }

    /// Appends a pair; callers push in field order (storage order).
    pub fn push(&mut self, field: &[u8], value: &[u8]) {
        debug_assert!(self.iter().last().is_none_or(|(f, _)| f < field));
        self.index
            .push((self.bytes.len(), field.len(), value.len()));
        self.bytes.extend_from_slice(field);
        self.bytes.extend_from_slice(value);
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Bytes of fields and values.
    pub fn data_len(&self) -> usize {
        self.bytes.len()
    }

    fn pair(&self, i: usize) -> (&[u8], &[u8]) {
        let (at, f, v) = self.index[i];
        (&self.bytes[at..at + f], &self.bytes[at + f..at + f + v])
    }

    /// The pairs in field order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        (0..self.len()).map(|i| self.pair(i))
    }

    /// A field's value (binary search).
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        let i = self
            .index
            .binary_search_by(|&(at, f, _)| self.bytes[at..at + f].cmp(field))
            .ok()?;
        Some(self.pair(i).1)
    }

    /// The set after `edits`, applied in order (`Some`: set the value, `None`: delete).
    pub fn edited(&self, edits: &[(Vec<u8>, Option<Vec<u8>>)]) -> FieldSet {
        let mut last: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
        for (f, v) in edits {
            last.insert(f, v.as_deref());
        }
        let mut out = FieldSet::with_capacity(self.len() + last.len());
        out.bytes.reserve(self.bytes.len());
        let mut changes = last.into_iter().peekable();
        for (f, v) in self.iter() {
            while let Some((cf, cv)) = changes.next_if(|(cf, _)| *cf < f) {
                if let Some(cv) = cv {
                    out.push(cf, cv);
                }
            }
            match changes.next_if(|(cf, _)| *cf == f) {
                Some((_, Some(cv))) => out.push(f, cv),
                Some((_, None)) => {}
                None => out.push(f, v),
            }
        }
        for (cf, cv) in changes {
            if let Some(cv) = cv {
                out.push(cf, cv);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> FieldSet {
        let mut s = FieldSet::default();
        for (f, v) in pairs {
            s.push(f.as_bytes(), v.as_bytes());
        }
        s
    }

    fn edit(f: &str, v: Option<&str>) -> (Vec<u8>, Option<Vec<u8>>) {
        (f.into(), v.map(Into::into))
    }

    #[test]
    fn lookups_and_edits_keep_field_order() {
        let s = set(&[("a", "1"), ("c", ""), ("e", "5")]);
        assert_eq!(s.get(b"c"), Some(&b""[..]));
        assert_eq!(s.get(b"b"), None);
        let edits = [
            edit("b", Some("2")),
            edit("a", None),
            edit("f", Some("x")),
            edit("f", Some("6")),
            edit("e", Some("50")),
            edit("0", None),
            edit("d", Some("4")),
            edit("d", None),
        ];
        let want = set(&[("b", "2"), ("c", ""), ("e", "50"), ("f", "6")]);
        assert_eq!(s.edited(&edits), want);
        assert_eq!(FieldSet::default().edited(&edits[..1]), set(&[("b", "2")]));
        assert!(set(&[("a", "1")]).edited(&edits[1..2]).is_empty());
    }
}
