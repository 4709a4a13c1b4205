//! The fields of a small hash as the hot cache holds them: field/value pairs sorted by field
//! (storage order), packed in one buffer. A hit shares the set; a write that changes a cached
//! hash builds the next set from a copy of the buffer ([`FieldSet::edited`]), rather than a
//! reference-count update per field and value.

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
        let i = self.find(field).ok()?;
        Some(self.pair(i).1)
    }

    fn find(&self, field: &[u8]) -> Result<usize, usize> {
        self.index
            .binary_search_by(|&(at, f, _)| self.bytes[at..at + f].cmp(field))
    }

    /// The set after `edits`, applied in order (`Some`: set the value, `None`: delete): a copy
    /// of the buffer, then each edit in place (a binary search, a move of the bytes after it).
    pub fn edited(&self, edits: &[(Vec<u8>, Option<Vec<u8>>)]) -> FieldSet {
        let mut out = self.clone();
        for (f, v) in edits {
            out.set(f, v.as_deref());
        }
        out
    }

    fn set(&mut self, field: &[u8], value: Option<&[u8]>) {
        match (self.find(field), value) {
            (Ok(i), Some(v)) => {
                let (at, f, old) = self.index[i];
                self.bytes.splice(at + f..at + f + old, v.iter().copied());
                self.index[i].2 = v.len();
                self.shift(i + 1, v.len() as isize - old as isize);
            }
            (Err(i), Some(v)) => {
                let at = self.index.get(i).map_or(self.bytes.len(), |e| e.0);
                self.bytes.splice(at..at, field.iter().chain(v).copied());
                self.index.insert(i, (at, field.len(), v.len()));
                self.shift(i + 1, (field.len() + v.len()) as isize);
            }
            (Ok(i), None) => {
                let (at, f, v) = self.index.remove(i);
                self.bytes.drain(at..at + f + v);
                self.shift(i, -((f + v) as isize));
            }
            (Err(_), None) => {}
        }
    }

    /// Moves the pairs from `from` on by `delta` bytes.
    fn shift(&mut self, from: usize, delta: isize) {
        for e in &mut self.index[from..] {
            e.0 = e.0.wrapping_add_signed(delta);
        }
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

    #[test]
    fn random_edits_match_a_sorted_map() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut model = std::collections::BTreeMap::new();
        let mut s = FieldSet::default();
        for _ in 0..200 {
            let edits: Vec<_> = (0..next(4))
                .map(|_| {
                    let f = format!("f{}", next(20)).into_bytes();
                    let v = (next(3) > 0).then(|| "v".repeat(next(5) as usize).into_bytes());
                    (f, v)
                })
                .collect();
            for (f, v) in &edits {
                match v {
                    Some(v) => model.insert(f.clone(), v.clone()),
                    None => model.remove(f),
                };
            }
            s = s.edited(&edits);
            let got: Vec<(Vec<u8>, Vec<u8>)> =
                s.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
            assert_eq!(got, want);
        }
    }
}
