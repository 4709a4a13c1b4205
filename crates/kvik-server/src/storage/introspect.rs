//! What RocksDB reports about itself: properties per column family and DB-wide, for INFO
//! memory and INFO rocksdb (the statistics tickers are read through `options::Shared`).

use super::Storage;

impl Storage {
    /// An integer property (`rocksdb.*`) of column family `cf`; 0 if RocksDB has no value.
    pub fn cf_property(&self, cf: &str, name: &str) -> u64 {
        self.db
            .property_int_value_cf(self.cf(cf), name)
            .ok()
            .flatten()
            .unwrap_or(0)
    }

    /// A DB-wide integer property (`rocksdb.*`, such as the block cache's); 0 if none.
    pub fn db_property(&self, name: &str) -> u64 {
        self.db.property_int_value(name).ok().flatten().unwrap_or(0)
    }

    /// A text property (`rocksdb.*`) of column family `cf`, such as `rocksdb.block-cache-entry-stats`.
    pub fn cf_property_text(&self, cf: &str, name: &str) -> Option<String> {
        self.db.property_value_cf(self.cf(cf), name).ok().flatten()
    }
}
